"""The Replay page's run and its results: progress while it runs, then the verdict first, the numbers beside the
baseline, the series and CDFs, the downloads and saving the run."""

from __future__ import annotations

import dataclasses
import io
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import polars as pl
import streamlit as st

from app.console import auth, cache, charts, data, deltas, writes
from app.console.whatif import charts as whatif_charts
from app.console.whatif.traffic import Pick
from app.exceptions import USER_ERRORS
from pool_registry import Registry
from replay.candidate import Candidate
from replay.gate import Gate, Verdict
from replay.predictors import ORACLE_NOTE
from replay.series import bucket_ms, latency_cdf, pool_timeline
from replay.summary import REUSE_SAID, Summary
from replay.whatif import OVERFLOW_SAID, WhatIf, fmt_ms, fmt_s, overflow_said, predictor_said, run_whatif

RESULT_KEY = "wi.result"
GAP_HELP = ("Replays the candidate once more with routers that know every request's true output length, and shows "
            "what that would change in busy cost, p99 TTFT and SLA violations: an upper bound, not achievable by "
            "a router.")


@dataclass(frozen=True)
class Outcome:
    """A finished what-if as the page keeps it between reruns."""

    whatif: WhatIf
    candidate_yaml: str
    seconds: float
    observed_reuse: dict[str, float] = field(default_factory=dict)  # per pool, the hit ratio its engines reported


def run(pick: Pick, candidate: Candidate, candidate_yaml: str, registry: Registry, baseline: Candidate | None,
        gate: Gate | None, seed: int, oracle_gap: bool = False) -> None:
    """Read the traffic, replay it with progress shown (with oracle_gap, once more with the oracle predictor),
    and keep the outcome for the page."""
    with st.status(f"Replaying {pick.label}…", expanded=True) as status:
        bar = st.progress(0.0, text="reading the traffic")
        started = time.monotonic()

        def say(share: float, what: str) -> None:
            bar.progress(min(1.0, share), text=what)

        try:
            traffic = pick.load()  # one short read of the database; nothing is held while the replay runs
            if candidate.faults.mode != "off":
                traffic = dataclasses.replace(traffic, telemetry=data.fault_telemetry(
                    cache.db_path(), traffic.first_ms, traffic.last_ms, candidate.faults.window_days))
            observed = data.observed_reuse(cache.db_path(), traffic.first_ms, traffic.last_ms)
            for note in traffic.notes:
                st.caption(note)
            whatif = run_whatif(candidate, traffic, registry, baseline=baseline, gate=gate, seed=seed,
                                progress=say, oracle_gap=oracle_gap)
        except USER_ERRORS as exc:
            status.update(label="The replay could not run", state="error", expanded=True)
            st.error(str(exc))
            return
        seconds = time.monotonic() - started
        status.update(label=f"Replayed {traffic.frame.height:,} requests in {seconds:.1f} s", state="complete",
                      expanded=False)
    st.session_state[RESULT_KEY] = Outcome(whatif, candidate_yaml, seconds, observed)
    st.session_state.pop("wi.saved_as", None)


def _money(v: float | None, places: int = 2) -> str:
    return "–" if v is None else f"${v:,.{places}f}"


def _secs(v: float | None) -> str:
    return fmt_s(v, " s", "–")


def _ms(v: float | None) -> str:
    return fmt_ms(v, " ms", "–")


def _latency(measure: str, q: int) -> Callable[[Summary], str]:
    shown = _ms if measure == "TPOT" else _secs
    return lambda s: shown(getattr(s, f"{measure.lower()}_p{q}"))


ROWS: list[tuple[str, Callable[[Summary], str]]] = [
    ("requests", lambda s: f"{s.requests:,}"), ("served", lambda s: f"{s.served:,}"),
    ("provisioned cost", lambda s: _money(s.provisioned_cost_usd)), ("busy cost", lambda s: _money(s.busy_cost_usd)),
    ("busy cost per million tokens", lambda s: _money(s.cost_per_mtok, 4)),
    *[(f"{m} p{q}", _latency(m, q)) for m in ("TTFT", "TPOT", "e2e") for q in (50, 95, 99)],
    ("SLA violation rate", lambda s: f"{s.sla_violation_rate:.2%}"),
    ("overflow: queued", lambda s: f"{s.overflow['queue']:,}"),
    ("overflow: served degraded", lambda s: f"{s.overflow['degrade']:,}"),
    ("rejected", lambda s: f"{s.rejected:,}"),
]


def kpi_table(runs: list[tuple[str, Summary]]) -> pl.DataFrame:
    """Measures as rows, one column of formatted values per run."""
    return pl.DataFrame({"measure": [label for label, _ in ROWS],
                         **{name: [get(s) for _, get in ROWS] for name, s in runs}})


def _change(cand: float | None, base: float | None) -> str | None:
    if cand is None or base is None or base == 0:
        return None
    return f"{(cand - base) / base:+.1%}"


def tiles(s: Summary, b: Summary | None) -> None:
    """The headline numbers of the candidate, with their change against the baseline (lower is better)."""
    cols = st.columns(6)
    pairs: list[tuple[str, str, float | None, float | None]] = [
        ("Busy cost", _money(s.busy_cost_usd), s.busy_cost_usd, b.busy_cost_usd if b else None),
        ("Provisioned cost", _money(s.provisioned_cost_usd), s.provisioned_cost_usd,
         b.provisioned_cost_usd if b else None),
        ("Busy cost / M tokens", _money(s.cost_per_mtok, 4), s.cost_per_mtok, b.cost_per_mtok if b else None),
        ("p99 TTFT", _secs(s.ttft_p99), s.ttft_p99, b.ttft_p99 if b else None),
        ("p99 e2e", _secs(s.e2e_p99), s.e2e_p99, b.e2e_p99 if b else None)]
    for col, (label, value, cand, base) in zip(cols, pairs, strict=False):
        deltas.metric(col, label, value, _change(cand, base), "inverse")
    delta = None if b is None else f"{(s.sla_violation_rate - b.sla_violation_rate) * 100:+.2f} points"
    deltas.metric(cols[5], "SLA violation rate", f"{s.sla_violation_rate:.2%}", delta, "inverse")


def verdict_box(verdict: Verdict | None, candidate: str, baseline: str | None) -> None:
    """The gate's verdict in one sentence a lead can act on, then every check."""
    if verdict is None:
        st.info(f"No gate ran: {'no baseline was replayed' if baseline is None else 'the gate is switched off'}. "
                "The numbers below are the candidate's" + (f" beside '{baseline}'." if baseline else "."))
        return
    lines = "\n".join(f"- {':material/check_circle:' if c.passed else ':material/cancel:'} {c.message}"
                      for c in verdict.checks)
    if verdict.passed:
        st.success(f"**Gate passed**: candidate '{candidate}' stays within every tolerance against baseline "
                   f"'{baseline}'. It may go live.\n\n{lines}")
    else:
        n = len(verdict.reasons)
        st.error(f"**Gate failed**: candidate '{candidate}' breaks {n} tolerance{'s' if n > 1 else ''} against "
                 f"baseline '{baseline}'. Do not ship it as it is.\n\n{lines}")


def show(outcome: Outcome, path: str, registry: Registry) -> None:
    """Everything about one finished what-if."""
    w = outcome.whatif
    base_name = w.baseline.name if w.baseline else None
    st.subheader(f"Result: '{w.candidate.name}'" + (f" against '{base_name}'" if base_name else ""))
    st.caption(f"{w.traffic}, seed {w.seed}; replayed in {outcome.seconds:.1f} s.")
    runs = [("candidate", w.summary)] + ([("baseline", w.base_summary)] if w.base_summary else [])
    oracle_warning(runs, w.oracle_summary is not None)
    verdict_box(w.verdict, w.candidate.name, base_name)
    tiles(w.summary, w.base_summary)
    st.dataframe(kpi_table(runs), hide_index=True, width="stretch", height=charts.table_height(len(ROWS)))
    if any(overflow_said(s) for _, s in runs):
        st.caption(OVERFLOW_SAID[:1].upper() + OVERFLOW_SAID[1:] + ".")
    st.caption(predictor_line(runs, w.history))
    line = faults_line(runs)
    if line:
        missed = any(s.retries_missed_sla for _, s in runs)
        (st.warning if missed else st.caption)(line)
    per_pool = pool_table(runs, outcome.observed_reuse)
    st.dataframe(per_pool, hide_index=True, width="stretch", height=charts.table_height(per_pool.height),
                 column_config={c: st.column_config.NumberColumn(format="percent")
                                for c in ("utilization", "KV use", "KV p95", "KV peak", "share", "prefix reuse",
                                          "observed reuse")})
    st.caption(reuse_line(runs))
    gap = w.oracle_gap()
    if gap is not None:
        st.markdown(f"**Oracle gap**: what knowing every request's output length would change for "
                    f"'{w.candidate.name}' (its predictor: {gap['predictor']}).")
        st.dataframe(gap_table(gap), hide_index=True, width="stretch")
    _charts(w, [p.id for p in registry.pools])
    _downloads(outcome)
    _save(outcome, path)


def reuse_line(runs: list[tuple[str, Summary]]) -> str:
    """How each run's prefix reuse was obtained, and its share of the prompt tokens."""
    parts = [f"{name}: {'-' if s.reuse is None else format(s.reuse, '.1%')} of prompt tokens, "
             f"{REUSE_SAID[s.reuse_source]}" for name, s in runs if s.reuse_source in REUSE_SAID]
    return "Prefix reuse, " + "; ".join(parts) + "."


def oracle_warning(runs: list[tuple[str, Summary]], gap: bool) -> None:
    """Say it whenever a number on the page comes from routers that read the true output lengths."""
    knowing = [name for name, s in runs if s.predictor_note] + (["the oracle gap"] if gap else [])
    if knowing:
        st.warning(f"**{ORACLE_NOTE}.** The numbers of {' and '.join(knowing)} come from routers that read every "
                   "request's true output length, which no gateway knows before the request is done.")


def predictor_line(runs: list[tuple[str, Summary]], history: int) -> str:
    """Each run's predictor and the error of its predicted output lengths over served requests."""
    parts = [f"{name}: {predictor_said(s)}" for name, s in runs]
    since = f"; it started from the {history:,} requests stored before the window" if history else ""
    return f"Output-length predictor, {'; '.join(parts)}{since}."


def faults_line(runs: list[tuple[str, Summary]]) -> str:
    """What the replayed failures and throttling did in each run ('' when the run replayed none)."""
    parts = []
    for name, s in runs:
        if not s.faults:
            continue
        failed = ", ".join(f"{p} {k}" for p, k in s.failures.items() if k)
        slow = ", ".join(f"{p} at {f['speed']:.0%} speed" for p, f in s.faults.items() if f["speed"] < 1.0)
        sources = sorted({str(f["source"]) for f in s.faults.values()})
        parts.append(f"{name}: {sum(s.failures.values())} replica failures injected"
                     + (f" ({failed})" if failed else "")
                     + f", {s.retried:,} requests retried, {s.retries_missed_sla:,} of them outside their SLA, "
                     f"{s.work_lost_tokens:,} tokens of work lost"
                     + (f"; throttled: {slow}" if slow else "") + f" (from the {' and '.join(sources)})")
    return ("Failures and throttling, " + "; ".join(parts) + ".") if parts else ""


def gap_table(gap: dict[str, Any]) -> pl.DataFrame:
    """The oracle gap's measures: with the candidate's predictor, with the oracle, and the change."""
    cost, p99, viol = gap["busy_cost_usd"], gap["ttft_p99"], gap["sla_violation_rate"]

    def change(v: float | None, unit: str) -> str:
        return "–" if v is None else f"{v:+.2f}{unit}"

    return pl.DataFrame({
        "measure": ["busy cost", "p99 TTFT", "SLA violation rate"],
        f"with {gap['predictor']}": [_money(cost["predictor"]), _secs(p99["predictor"]),
                                     f"{viol['predictor']:.2%}"],
        "with the oracle": [_money(cost["oracle"]), _secs(p99["oracle"]), f"{viol['oracle']:.2%}"],
        "change": [change(cost["change_pct"], " %"), change(p99["change_pct"], " %"),
                   change(viol["change_pts"], " points")]})


def pool_table(runs: list[tuple[str, Summary]], observed: dict[str, float] | None = None) -> pl.DataFrame:
    """Per pool and run: requests, share of the requests, utilization, KV use (mean, p95 of replica time, peak),
    busy cost, prefix reuse replayed and (where its engines report it) observed, and what reuse saved; with images
    in the traffic, the images encoded, the encoder's mean time per request carrying them and its share of the
    pool's busy time."""
    images = any(s.ttft_split for _, s in runs)
    rows = []
    for name, s in runs:
        for pool, p in s.pools.items():
            encoder = {"images": p.images, "encoder s": _secs(p.encode_s), "encoder share": p.encode_share} \
                if images else {}
            rows.append({"run": name, "pool": pool, "requests": p.requests,
                         "share": p.requests / s.requests if s.requests else 0.0, "utilization": p.utilization,
                         "KV use": p.kv_use, "KV p95": p.kv_p95, "KV peak": p.kv_peak,
                         "busy cost": _money(p.busy_cost_usd),
                         "provisioned cost": _money(p.provisioned_cost_usd), "TTFT p99": _secs(p.ttft_p99),
                         "prefix reuse": p.reuse, "observed reuse": (observed or {}).get(pool),
                         "blocks evicted": p.blocks_evicted,
                         "TTFT saved": _secs(p.ttft_saved_s), "busy cost saved": _money(p.busy_cost_saved_usd),
                         **encoder})
    return pl.DataFrame(rows)


def _charts(w: WhatIf, pools: list[str]) -> None:
    sides: list[tuple[str, Any, Any]] = [("candidate", w.result, w.pools)]
    if w.base_result:
        sides.append(("baseline", w.base_result, w.base_pools))
    step = bucket_ms(max(result.summary.window_s for _, result, _ in sides))  # one bucket for both panels
    frames, cdfs = [], []
    for name, result, specs in sides:
        tl = pool_timeline(result, specs, step)
        frames.append(tl.with_columns(pl.lit(name).alias("run")))
        cdfs.append(latency_cdf(result.requests).with_columns(pl.lit(name).alias("run")))
    timeline = pl.concat(frames)
    for column, chart in zip(st.columns(3), whatif_charts.latency_cdfs(pl.concat(cdfs)), strict=False):
        with column:
            charts.show(chart)
    served = timeline.filter(pl.col("pool") != "rejected")
    charts.show(whatif_charts.pool_over_time(served, "utilization", "Utilization by pool", pools))
    charts.show(whatif_charts.pool_over_time(served, "kv_use", "KV cache use by pool (estimated from each "
                                                               "request's admission, first token and finish)", pools))
    charts.show(whatif_charts.routing_share(timeline, pools))


def per_request_parquet(w: WhatIf) -> bytes:
    """Every request of the candidate (and of the baseline), with a `run` column, as Parquet."""
    parts = [w.result.requests.with_columns(pl.lit("candidate").alias("run"))]
    if w.base_result:
        parts.append(w.base_result.requests.with_columns(pl.lit("baseline").alias("run")))
    out = io.BytesIO()
    pl.concat(parts).write_parquet(out)
    return out.getvalue()


def _downloads(outcome: Outcome) -> None:
    w = outcome.whatif
    c1, c2 = st.columns(2)
    c1.download_button("Download per-request results (Parquet)", data=lambda: per_request_parquet(w),
                       file_name=f"{w.candidate.name}-requests.parquet", mime="application/vnd.apache.parquet",
                       key="wi.download_requests", on_click="ignore")
    c2.download_button("Download candidate YAML", data=outcome.candidate_yaml, file_name=f"{w.candidate.name}.yaml",
                       mime="application/yaml", key="wi.download_yaml", on_click="ignore",
                       help="Valid input to `hetpool replay run --candidate`, for a CI gate.")


def _save(outcome: Outcome, path: str) -> None:
    saved = st.session_state.get("wi.saved_as")
    if saved:
        st.success(f"Saved as run {saved}. It is listed under History.")
        return
    user = auth.current()
    refusal = user.reason("save_replay_run") if user else "Log in to save replay runs."
    c1, c2 = st.columns([1, 2])
    st.session_state.setdefault("wi.save_name", outcome.whatif.candidate.name)
    name = c1.text_input("Name of the run", key="wi.save_name", disabled=refusal is not None)
    note = c2.text_input("Note", key="wi.save_note", placeholder="what this run tries, and why",
                         disabled=refusal is not None)
    if refusal:
        st.caption(refusal)
    if st.button("Save run", key="wi.save", disabled=refusal is not None, help=refusal):
        try:  # the role is checked again where the run is written: a disabled button is no guard by itself
            run_id = writes.save_run(path, outcome.whatif.run_record(name.strip() or None, note.strip() or None), user)
        except USER_ERRORS as exc:
            st.error(str(exc))
            return
        st.session_state["wi.saved_as"] = run_id
        st.session_state["wi.open"] = run_id  # History (drawn after this) opens the run just saved
        st.success(f"Saved as run {run_id}. It is listed under History.")
