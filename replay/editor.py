"""A candidate as a form holds it: every editable value of every pool, starting from the registry.

The form is turned into candidate YAML (only what differs from the registry becomes an override) and that text
is checked by the candidate loader itself, so an invalid value is refused with the loader's own message and
what a form produces is always valid input to `hetpool replay run --candidate`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import yaml

from pool_registry import Interconnect, Registry
from replay.calibrate.record import FITTED
from replay.candidate import Candidate, PredictorSpec
from replay.candidate_loader import load_candidate_text, predictor_to_data
from replay.exceptions import CandidateError, ReplayError
from replay.fleet import pools_by_id, resolve_pools

# the fitted coefficients are calibration's own list, so "Use fitted" can put every one of them in the form
POOL_FIELDS = ("replicas", "max_concurrency", "pp", "max_num_batched_tokens", "gpu_memory_utilization",
               "kv_cache_dtype", *FITTED, "hourly_cost_per_device")
OPTIONAL_FIELDS = ("mfu_decode",)  # empty means the registry's rule (decode at the prefill's mfu)
INT_FIELDS = ("replicas", "max_concurrency", "pp", "max_num_batched_tokens")
# The tiers of examples/candidates: a form starts with them (the registry holds no SLA).
DEFAULT_TIERS: dict[str, tuple[float | None, float | None]] = {
    "standard": (2.0, 60.0), "premium": (0.5, 20.0), "batch": (None, 600.0)}
SOURCE = "candidate"


@dataclass(frozen=True)
class CandidateForm:
    """Every value a candidate editor shows; pools maps pool id -> field -> value (see POOL_FIELDS)."""

    name: str
    policy: str
    overflow: str = "queue"
    noise: float = 0.0
    prefill: tuple[str, ...] = ()
    decode: tuple[str, ...] = ()
    encode: tuple[str, ...] = ()  # pd_split's encode pools (none: images encoded where they are prefilled)
    tiers: dict[str, tuple[float | None, float | None]] = field(default_factory=lambda: dict(DEFAULT_TIERS))
    pools: dict[str, dict[str, Any]] = field(default_factory=dict)
    enabled: dict[str, bool] = field(default_factory=dict)
    predictor: str = "online"                                     # replay.predictors
    predictor_options: dict[str, Any] = field(default_factory=dict)


def registry_values(registry: Registry) -> dict[str, dict[str, Any]]:
    """Pool id -> the registry's own value of every editable field, for pools that serve."""
    out = {}
    for pool in registry.pools:
        s = pool.serving
        if s is None:
            continue
        out[pool.id] = {"replicas": s.replicas, "max_concurrency": s.max_concurrency, "pp": s.pp,
                        "max_num_batched_tokens": s.max_num_batched_tokens,
                        "gpu_memory_utilization": s.gpu_memory_utilization, "kv_cache_dtype": s.kv_cache_dtype,
                        "step_overhead_ms": s.step_overhead_ms, "seq_overhead_us": s.seq_overhead_us,
                        "chunk_overhead_us": s.chunk_overhead_us,
                        "collective_us": _hop(pool.cost_model.collective_us, registry.chip_of(pool).interconnect),
                        "mfu": pool.cost_model.mfu, "mfu_decode": pool.cost_model.mfu_decode,
                        "mem_bw_eff": pool.cost_model.mem_bw_eff, "serial_share": pool.cost_model.serial_share,
                        "hourly_cost_per_device": pool.hourly_cost_per_device}
    return out


def form_of(registry: Registry, candidate: Candidate | None = None) -> CandidateForm:
    """The form showing a candidate's values (the registry's where it overrides nothing)."""
    cand = candidate or Candidate(name="candidate")
    pools = registry_values(registry)
    effective = pools_by_id(registry, dataclasses.replace(cand, pools={
        k: dataclasses.replace(o, enabled=True) for k, o in cand.pools.items()}))
    for pool_id, values in pools.items():
        spec = effective[pool_id]
        values.update({f: getattr(spec, f) for f in POOL_FIELDS})
        values["collective_us"] = _hop(spec.collective_us, spec.chip.interconnect)
    tiers = {t: (s.ttft_s, s.e2e_s) for t, s in cand.sla_tiers.items()} if cand.sla_tiers else dict(DEFAULT_TIERS)
    return CandidateForm(name=cand.name, policy=cand.policy, overflow=cand.overflow, noise=cand.noise,
                         prefill=cand.policy_options.get("prefill", ()), decode=cand.policy_options.get("decode", ()),
                         encode=cand.policy_options.get("encode", ()), tiers=tiers, pools=pools,
                         enabled={p: cand.override(p).enabled for p in pools},
                         predictor=cand.predictor.name, predictor_options=dict(cand.predictor.options))


def _hop(declared: float | None, link: Interconnect) -> float:
    """A collective hop's latency in us: the cost model's, else the link's datasheet figure."""
    return float(link.latency_us if declared is None else declared)


def candidate_body(form: CandidateForm, registry: Registry) -> dict[str, Any]:
    """The candidate file's body: what differs from the registry becomes a pool override."""
    base = registry_values(registry)
    policy: Any = form.policy
    if form.policy == "pd_split":
        policy = {"name": "pd_split", "prefill": list(form.prefill), "decode": list(form.decode),
                  **({"encode": list(form.encode)} if form.encode else {})}
    body: dict[str, Any] = {"name": form.name, "policy": policy, "overflow": form.overflow}
    if form.noise:
        body["noise"] = form.noise
    body["sla_tiers"] = {t: {k: v for k, v in (("ttft_s", ttft), ("e2e_s", e2e)) if v is not None}
                         for t, (ttft, e2e) in form.tiers.items()}
    pools: dict[str, Any] = {}
    for pool_id, values in form.pools.items():
        if not form.enabled.get(pool_id, True):
            pools[pool_id] = {"enabled": False}
            continue
        changed = {f: _plain(values[f]) for f in POOL_FIELDS if f in values and values[f] != base[pool_id][f]}
        if changed:
            pools[pool_id] = changed
    if pools:
        body["pools"] = pools
    body["predictor"] = predictor_to_data(PredictorSpec(form.predictor, dict(form.predictor_options)))
    return body


def _plain(value: Any) -> Any:
    """Numbers as YAML writes them plainly (a whole float stays a float, so 1.0 is not read back as 1)."""
    return float(value) if isinstance(value, float) else value


def candidate_yaml(form: CandidateForm, registry: Registry) -> str:
    """The candidate file a form stands for, with a header saying how to run it."""
    header = (f"# Candidate '{form.name}', written by the hetpool console over the registry '{registry.name}'.\n"
              "# Run it with: hetpool replay run --candidate THIS_FILE [--baseline FILE --gate FILE]\n")
    return header + yaml.safe_dump(candidate_body(form, registry), sort_keys=False, default_flow_style=None)


def check_form(form: CandidateForm, registry: Registry) -> tuple[Candidate | None, list[str], str]:
    """(candidate, problems, yaml): the loader's messages for an invalid form, and the replay's checks of what
    the overrides add up to (pipeline width, token budget) once the loader accepts it."""
    text = candidate_yaml(form, registry)
    try:
        candidate = load_candidate_text(text, registry, SOURCE, default_name=form.name or "candidate")
    except CandidateError as exc:
        return None, [str(p) for p in exc.problems], text
    try:
        resolve_pools(registry, candidate)
    except ReplayError as exc:
        return None, [str(exc)], text
    return candidate, [], text
