"""The Replay page's candidate editor, baseline picker and gate: widgets over a replay.editor.CandidateForm.

Widget values live in st.session_state under "wi." keys. A form is loaded into them (from the registry, a
saved run, a calibration or a sweep point) only from callbacks or before the widgets are drawn, as Streamlit
requires; the candidate is then whatever replay.editor.check_form makes of the widgets' values.
"""

from __future__ import annotations

from typing import Any

import streamlit as st
import yaml

from app.console import data
from pool_registry import KV_CACHE_DTYPES, Registry
from replay.candidate import OVERFLOW_MODES, Candidate
from replay.candidate_loader import load_candidate_text
from replay.editor import INT_FIELDS, OPTIONAL_FIELDS, POOL_FIELDS, CandidateForm, form_of, registry_values
from replay.exceptions import CandidateError, GateError
from replay.gate import FIELDS as GATE_FIELDS
from replay.gate import Gate, load_gate_text
from replay.policies import POLICIES
from replay.predictors import ORACLE_NOTE, PREDICTORS
from replay.predictors.online import QUANTILE as ONLINE_QUANTILE

LABELS = {"replicas": "Replicas", "max_concurrency": "Max concurrency", "pp": "Pipeline stages (pp)",
          "max_num_batched_tokens": "Token budget per step", "gpu_memory_utilization": "GPU memory utilization",
          "kv_cache_dtype": "KV cache dtype", "step_overhead_ms": "Step overhead (ms)",
          "seq_overhead_us": "Overhead per sequence (µs)",
          "chunk_overhead_us": "Overhead per prompt chunk (µs)", "collective_us": "Collective hop latency (µs)",
          "mfu": "MFU",
          "mfu_decode": "MFU of decode tokens (empty: as MFU)",
          "mem_bw_eff": "Memory bandwidth efficiency", "serial_share": "Serial share of memory and compute",
          "hourly_cost_per_device": "Hourly cost per device ($)"}
FORMATS = {"gpu_memory_utilization": "%.2f", "step_overhead_ms": "%.2f", "seq_overhead_us": "%.1f",
           "chunk_overhead_us": "%.1f",
           "collective_us": "%.2f", "mfu": "%.3f", "mfu_decode": "%.3f", "mem_bw_eff": "%.3f", "serial_share": "%.2f",
           "hourly_cost_per_device": "%.2f"}
GATE_LABELS = {"max_cost_increase_pct": "Busy and provisioned cost may rise at most (%)",
               "max_ttft_p99_increase_pct": "p99 TTFT may rise at most (%)",
               "max_sla_violation_increase_pts": "SLA violations may rise at most (points)"}
DEFAULT_GATE = {"max_cost_increase_pct": 5.0, "max_ttft_p99_increase_pct": 10.0,
                "max_sla_violation_increase_pts": 0.5}  # examples/gate.yaml
REGISTRY_BASELINE = "registry"
LOADED_KEY = "wi.loaded_for"
PREDICTOR_HELP = ("What the router expects each request to generate, which no gateway knows before it is done. "
                  "online: a quantile of the output lengths of requests already completed (by model, SLA tier and "
                  "prompt length, starting from the requests stored before the window); fixed: one length for "
                  "every request; table: a length per SLA tier; oracle: the true length, an upper bound no router "
                  "can reach.")
QUANTILE, TOKENS = ONLINE_QUANTILE, 256   # the form's starting quantile and token counts (the predictors' own)
SHOWN = {"online": ("quantile",), "fixed": ("tokens",), "table": ("tiers", "default"), "oracle": ()}


def key(pool: str, name: str) -> str:
    """The session key of one pool field."""
    return f"wi.{pool}.{name}"


def load_form(form: CandidateForm) -> None:
    """Put a form's values into the widgets' session state (call from a callback, or before drawing)."""
    s = st.session_state
    s["wi.name"], s["wi.policy"], s["wi.overflow"], s["wi.noise"] = form.name, form.policy, form.overflow, form.noise
    s["wi.prefill"], s["wi.decode"], s["wi.encode"] = list(form.prefill), list(form.decode), list(form.encode)
    s["wi.tiers"] = list(form.tiers)
    for tier, (ttft, e2e) in form.tiers.items():
        s[f"wi.tier.{tier}.ttft_s"] = None if ttft is None else float(ttft)
        s[f"wi.tier.{tier}.e2e_s"] = None if e2e is None else float(e2e)
    for pool, values in form.pools.items():
        s[key(pool, "enabled")] = form.enabled.get(pool, True)
        for f in POOL_FIELDS:
            v = values[f]
            s[key(pool, f)] = (int(v) if f in INT_FIELDS else v if f == "kv_cache_dtype" or v is None
                               else float(v))
    options = form.predictor_options
    s["wi.predictor"] = form.predictor
    s["wi.predictor.quantile"] = float(options.get("quantile", QUANTILE)) if form.predictor == "online" else QUANTILE
    s["wi.predictor.tokens"] = int(options.get("tokens", TOKENS)) if form.predictor == "fixed" else TOKENS
    table = options.get("tiers", {}) if form.predictor == "table" else {}
    for tier in form.tiers:
        s[f"wi.predictor.tier.{tier}"] = None if tier not in table else int(table[tier])
    s["wi.predictor.default"] = int(options.get("default", TOKENS)) if form.predictor == "table" else TOKENS
    # options the form has no widget for ride along as they came
    s["wi.predictor.kept"] = (form.predictor, {k: v for k, v in options.items()
                                               if k not in SHOWN.get(form.predictor, ())})


def ensure_form(registry: Registry) -> None:
    """Start the widgets from the registry the first time, and again when the registry's pools change."""
    ident = (registry.name, tuple(registry_values(registry)))
    if st.session_state.get(LOADED_KEY) != ident or "wi.name" not in st.session_state:
        load_form(form_of(registry))
        st.session_state[LOADED_KEY] = ident


def read_form(registry: Registry) -> CandidateForm:
    """The form as the widgets hold it now."""
    s = st.session_state
    pools = registry_values(registry)
    tiers = {t: (s.get(f"wi.tier.{t}.ttft_s"), s.get(f"wi.tier.{t}.e2e_s")) for t in s.get("wi.tiers", [])}
    name, options = read_predictor(list(tiers))
    return CandidateForm(
        name=str(s.get("wi.name") or "candidate"), policy=s["wi.policy"], overflow=s["wi.overflow"],
        noise=float(s.get("wi.noise") or 0.0), prefill=tuple(s.get("wi.prefill", ())),
        decode=tuple(s.get("wi.decode", ())), encode=tuple(s.get("wi.encode", ())), tiers=tiers,
        pools={p: {f: s.get(key(p, f), v[f]) for f in POOL_FIELDS} for p, v in pools.items()},
        enabled={p: bool(s.get(key(p, "enabled"), True)) for p in pools}, predictor=name, predictor_options=options)


def read_predictor(tiers: list[str]) -> tuple[str, dict[str, Any]]:
    """The predictor and the options its widgets hold (the loader checks them, as it checks a file)."""
    s = st.session_state
    name = str(s.get("wi.predictor") or "online")
    kept_for, kept = s.get("wi.predictor.kept") or ("", {})
    options: dict[str, Any] = dict(kept) if kept_for == name else {}
    if name == "online" and s.get("wi.predictor.quantile") not in (None, QUANTILE):
        options["quantile"] = float(s["wi.predictor.quantile"])
    elif name == "fixed" and s.get("wi.predictor.tokens") is not None:
        options["tokens"] = int(s["wi.predictor.tokens"])
    elif name == "table":
        options["tiers"] = {t: int(s[f"wi.predictor.tier.{t}"]) for t in tiers
                            if s.get(f"wi.predictor.tier.{t}") is not None}
        if s.get("wi.predictor.default") not in (None, TOKENS):
            options["default"] = int(s["wi.predictor.default"])
    return name, options


def editor(registry: Registry) -> None:
    """Draw the candidate editor."""
    base = registry_values(registry)
    c1, c2, c3, c4 = st.columns(4)
    c1.text_input("Candidate name", key="wi.name")
    c2.selectbox("Routing policy", list(POLICIES), key="wi.policy",
                 help="sla_cost: the cheapest pool predicted to meet the request's SLA tier; cost_min: the cheapest "
                      "pool that fits; pd_split: prefill and decode on different pools; observed: the trace's own "
                      "routing.")
    c3.selectbox("Overflow", OVERFLOW_MODES, key="wi.overflow",
                 help="What happens to a request no pool can take within its limits: queue it where it finishes "
                      "first, reject it, or serve it degraded (counted as an SLA miss).")
    c4.number_input("Noise", key="wi.noise", step=0.05, format="%.2f",
                    help="Spread of each replica's speed (a mean-1 lognormal factor); 0 = every replica alike.")
    if st.session_state.get("wi.policy") == "pd_split":
        d1, d2, d3 = st.columns(3)
        d1.multiselect("Prefill pools", list(base), key="wi.prefill")
        d2.multiselect("Decode pools", list(base), key="wi.decode")
        d3.multiselect("Encode pools", list(base), key="wi.encode",
                       help="Pools that only run the vision encoder on requests' images, before their prefill "
                            "(none: each prefill replica encodes its own requests' images).")
    tiers = st.session_state.get("wi.tiers", [])
    predictor_inputs(tiers)
    with st.expander(f"SLA tiers: {', '.join(tiers)} (seconds; leave a limit empty for none)"):
        for tier in tiers:
            t1, t2, t3 = st.columns([1, 2, 2])
            t1.markdown(f"`{tier}`")
            # value=None lets a limit be emptied (no limit); the value itself comes from the session state
            t2.number_input(f"{tier}: TTFT limit (s)", key=f"wi.tier.{tier}.ttft_s", value=None, step=0.1,
                            format="%.2f")
            t3.number_input(f"{tier}: e2e limit (s)", key=f"wi.tier.{tier}.e2e_s", value=None, step=1.0,
                            format="%.1f")
    changed = [p for p in base if _changes(p, base[p]) or not st.session_state.get(key(p, "enabled"), True)]
    summary = f"changed: {', '.join(changed)}" if changed else "all as in the registry"
    with st.expander(f"Pools: replicas, concurrency, batching, coefficients and cost ({summary})"):
        for pool, tab in zip(base, st.tabs(list(base)), strict=True):
            with tab:
                _pool_inputs(pool, base[pool])


def predictor_inputs(tiers: list[str]) -> None:
    """The output-length predictor and its options."""
    s = st.session_state
    s.setdefault("wi.predictor", "online")
    s.setdefault("wi.predictor.quantile", QUANTILE)
    s.setdefault("wi.predictor.tokens", TOKENS)
    s.setdefault("wi.predictor.default", TOKENS)
    c1, c2 = st.columns([1, 3])
    c1.selectbox("Output-length predictor", list(PREDICTORS), key="wi.predictor", help=PREDICTOR_HELP)
    name = s.get("wi.predictor")
    if name == "online":
        c2.number_input("Quantile of the completed requests' output lengths", key="wi.predictor.quantile",
                        step=0.05, format="%.2f", help="0.5 is the median; a higher one expects longer outputs, "
                                                       "which for long-tailed lengths better sizes a queue's work.")
    elif name == "fixed":
        c2.number_input("Output tokens predicted for every request", key="wi.predictor.tokens", step=16)
    elif name == "table":
        cols = c2.columns(len(tiers) + 1)
        for col, tier in zip(cols, tiers, strict=False):
            col.number_input(f"{tier} (tokens)", key=f"wi.predictor.tier.{tier}", value=None, step=16,
                             help="Leave empty for the default.")
        cols[-1].number_input("Other tiers (tokens)", key="wi.predictor.default", step=16)
    elif name == "oracle":
        c2.warning(f"{ORACLE_NOTE}: routers read every request's true output length, which no gateway knows.")


def _changes(pool: str, registry_value: dict[str, Any]) -> list[str]:
    return [f"{LABELS[f].lower()} {registry_value[f]} → {st.session_state.get(key(pool, f))}" for f in POOL_FIELDS
            if st.session_state.get(key(pool, f), registry_value[f]) != registry_value[f]]


def _pool_inputs(pool: str, registry_value: dict[str, Any]) -> None:
    st.checkbox(f"Serve with {pool}", key=key(pool, "enabled"))
    cols = st.columns(5)
    for k, f in enumerate(POOL_FIELDS):
        col = cols[k % 5]
        if f == "kv_cache_dtype":
            col.selectbox(LABELS[f], list(KV_CACHE_DTYPES), key=key(pool, f))
        elif f in INT_FIELDS:
            col.number_input(LABELS[f], key=key(pool, f), step=1)
        elif f in OPTIONAL_FIELDS:  # value=None lets it be emptied; the value itself comes from the session state
            col.number_input(LABELS[f], key=key(pool, f), value=None, step=0.01, format=FORMATS[f])
        else:
            col.number_input(LABELS[f], key=key(pool, f), step=0.01, format=FORMATS[f])
    changed = _changes(pool, registry_value)
    st.caption("Changed from the registry: " + "; ".join(changed) if changed else "As in the registry.")


def baseline(path: str, registry: Registry, form: CandidateForm) -> tuple[Candidate | None, list[str]]:
    """Draw the baseline picker: the registry as it is under a policy, or the candidate of a saved run."""
    runs = data.saved_runs(path)
    labels = {REGISTRY_BASELINE: "The registry as it is"}
    for row in runs.iter_rows(named=True):
        labels[str(row["run_id"])] = f"Saved run {row['run_id']}: {row['name'] or _name(row['candidate'])}"
    c1, c2 = st.columns(2)
    choice = c1.selectbox("Baseline", list(labels), format_func=labels.__getitem__, key="wi.baseline")
    if choice == REGISTRY_BASELINE:
        st.session_state.setdefault("wi.base_policy", "sla_cost")
        policy = c2.selectbox("Baseline routing policy", [p for p in POLICIES if p != "pd_split"],
                              key="wi.base_policy", help="The registry has no routing policy of its own: pick the one "
                                                         "production runs (sla_cost in the examples).")
        tiers = {t: {k: v for k, v in (("ttft_s", a), ("e2e_s", b)) if v is not None} for t, (a, b) in
                 form.tiers.items()}
        text = yaml.safe_dump({"name": "registry", "policy": policy, "overflow": "queue", "sla_tiers": tiers})
        c2.caption("The baseline keeps every pool as the registry declares it and measures SLA by the candidate's "
                   "tiers.")
        source = "baseline"
    else:
        run = data.saved_run(path, int(choice))
        text, source = yaml.safe_dump((run or {}).get("candidate", {})), f"saved run {choice}"
        c2.caption(f"The candidate of saved run {choice}, as it was saved.")
    try:
        return load_candidate_text(text, registry, source, default_name="baseline"), []
    except CandidateError as exc:
        return None, [str(p) for p in exc.problems]


def _name(candidate_json: str) -> str:
    return str(yaml.safe_load(candidate_json).get("name", "?"))


def gate() -> tuple[Gate | None, list[str]]:
    """Draw the gate's tolerances; the gate YAML they make is checked by the gate loader."""
    s = st.session_state
    for f, v in DEFAULT_GATE.items():
        s.setdefault(f"wi.gate.{f}", v)
    s.setdefault("wi.gate_on", True)
    on = st.checkbox("Gate the candidate against the baseline", key="wi.gate_on")
    cols = st.columns(3)
    for col, f in zip(cols, GATE_FIELDS, strict=True):
        col.number_input(GATE_LABELS[f], key=f"wi.gate.{f}", value=None, step=0.5, format="%.2f", disabled=not on,
                         help="Leave empty to leave this measure ungated; a negative limit demands an improvement.")
    if not on:
        return None, []
    values = {f: s.get(f"wi.gate.{f}") for f in GATE_FIELDS}
    text = yaml.safe_dump({f: v for f, v in values.items() if v is not None})
    try:
        return load_gate_text(text, "gate"), []
    except GateError as exc:
        return None, [str(p) for p in exc.problems]
