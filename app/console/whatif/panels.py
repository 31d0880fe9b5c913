"""The Replay page's panels beside the what-if: calibration, capacity (closed-loop benchmarks) and a sweep."""

from __future__ import annotations

import dataclasses
from typing import Any

import polars as pl
import streamlit as st
import yaml

from app.console import cache, charts, data
from app.console.whatif import charts as whatif_charts
from app.console.whatif import form as whatif_form
from app.console.whatif.traffic import Pick
from app.exceptions import USER_ERRORS
from pool_registry import Registry
from replay.bench import closed_loop, concurrency_levels, default_requests
from replay.benchtable import parse_bench_table
from replay.calibrate import PoolFit, calibrate
from replay.calibrate.notes import UNSAID_STATISTIC
from replay.calibrate.record import rounded
from replay.candidate import OVERRIDE_FIELDS, Candidate, PoolOverride
from replay.editor import check_form, form_of
from replay.engine import run_replay
from replay.exceptions import GridError
from replay.fleet import pools_by_id
from replay.policies import POLICIES
from replay.sweep import expand, load_grid_text, run_sweep

SCATTER_POINTS = 1500  # per pool: enough to see the fit, few enough for the browser
MAX_POINTS = 24        # a sweep from the page stays small; larger grids belong to `hetpool replay sweep`
SWEEP_FIELDS = [f for f in OVERRIDE_FIELDS if f not in ("enabled", "kv_cache_dtype", "devices_per_replica")]


def _progress(bar: Any) -> Any:
    def say(share: float, what: str) -> None:
        bar.progress(min(1.0, share), text=what)
    return say


def calibration(path: str, registry: Registry, pick: Pick | None, pools: tuple[str, ...] | None = None) -> None:
    """Fit each chip and engine's coefficients (of `pools` alone when given) from the chosen traffic's observed
    latencies and/or a benchmark table, and show every coefficient's status and the model against each row."""
    st.caption("Fits the step model's coefficients by replaying the chosen traffic's observed requests (their "
               "pool, TTFT and e2e) and/or running each row of a benchmark table closed-loop, as `hetpool replay "
               "calibrate` does. Pools of one chip and engine share one fit. Pick the traffic on the What-if tab.")
    if pools:
        own, picked = ("its", "the pool") if len(pools) == 1 else ("their", "the pools")
        st.caption(f"Fits {', '.join(pools)} alone, from {own} own evidence: {picked} picked in the sidebar "
                   "(as `--pool`). Clear the sidebar's pools to fit the whole fleet.")
    upload = st.file_uploader("Benchmark table (CSV: pool,isl,osl,concurrency,ttft_ms,tpot_ms)", type=["csv"],
                              key="wi.calib_bench",
                              help="Optional columns say how the client ran, and each row is replayed so: arrivals "
                                   "(staggered or lockstep: every client starting at once), range_ratio and "
                                   "range_style (lengths drawn around isl and osl as vllm bench serve does, or "
                                   "up_to them as SGLang's bench_serving does) and num_prompts; statistic says "
                                   "whether ttft_ms and tpot_ms are medians (the default), means or p99.")
    use_traffic = pick is not None and st.checkbox(f"Fit the observed requests of {pick.label} too"
                                                   if upload else f"Fit the observed requests of {pick.label}",
                                                   value=True, key="wi.calib_traffic")
    if upload is None and not use_traffic:
        st.info("Pick traffic with observed latencies on the What-if tab, or upload a benchmark table.")
        return
    what = " and ".join(x for x in ((pick.label if use_traffic and pick else ""),
                                    (upload.name if upload else "")) if x)
    if st.button(f"Fit coefficients on {what}", key="wi.calibrate"):
        with st.status("Calibrating…", expanded=True) as status:
            bar = st.progress(0.0, text="reading the evidence")
            try:
                bench = parse_bench_table(upload.getvalue().decode("utf-8-sig"), upload.name) if upload else None
                traffic = pick.load().frame if use_traffic and pick else None
                base = _base(registry)
                fits, _ = calibrate(traffic, registry, bench=bench, base=base, progress=_progress(bar),
                                    pools=pools)
                scatter = _scatter(traffic, registry, base, fits) if traffic is not None else _scatter_none()
            except CALIBRATION_ERRORS as exc:
                status.update(label="Calibration could not run", state="error")
                st.error(str(exc))
                return
            status.update(label=_fitted_label(fits), state="complete", expanded=False)
        st.session_state["wi.calib"] = (fits, scatter, pools_by_id(registry, base))
    kept = st.session_state.get("wi.calib")
    if kept is None:
        return
    fits, scatter, configured = kept
    rows = [{"pool": f.pool, "observed requests": f.n_ttft, "benchmark rows": f.n_bench,
             "mfu (configured)": configured[f.pool].mfu, "mfu (fitted)": f.mfu,
             "mem_bw_eff (configured)": configured[f.pool].mem_bw_eff, "mem_bw_eff (fitted)": f.mem_bw_eff,
             "step overhead ms (configured)": configured[f.pool].step_overhead_ms,
             "step overhead ms (fitted)": f.step_overhead_ms, "per-sequence µs (fitted)": f.seq_overhead_us,
             "hop latency µs (fitted)": f.collective_us, "serial share (fitted)": f.serial_share,
             "TTFT MAPE": f.ttft_mape, "TTFT median error": f.ttft_mdape, "TTFT R²": f.ttft_r2,
             "TPOT MAPE": f.tpot_mape, "TPOT median error": f.tpot_mdape, "TPOT R²": f.tpot_r2,
             "notes": "; ".join(f.notes)} for f in fits]
    st.dataframe(pl.DataFrame(rows), hide_index=True, width="stretch", column_config={
        c: st.column_config.NumberColumn(format="percent" if "MAPE" in c or "median" in c else "%.3f") for c in rows[0]
        if c not in ("pool", "notes", "observed requests", "benchmark rows")})
    st.caption("MAPE: mean absolute error over observed, per request or row, as a percentage of it. R²: share of "
               "the observed variation the model explains (1 = all).")
    for f in fits:
        if f.carried_from:  # a fit nobody checked on this pool: say so where it cannot be missed
            st.info(f"**{f.pool}** has no evidence of its own: {f.notes[0] if f.notes else ''}")
        elif f.mfu is None and f.notes:
            st.warning(f"**{f.pool}** was not fitted: {f.notes[0]}")
        else:  # a fit that misses its own rows, lands outside physics or may have read means as medians
            for n in f.notes:
                wrong = n.startswith(("the model cannot explain", "fitted ")) and (f.explains is False or f.unphysical)
                if wrong or UNSAID_STATISTIC in n:
                    st.warning(f"**{f.pool}**: {n}")
    _coefficients(fits, configured)
    checks = [c for f in fits for c in f.checks]
    if checks:
        frame = pl.DataFrame([dataclasses.asdict(c) for c in checks])
        charts.show(whatif_charts.bench_fit(frame, [p.id for p in registry.pools]))
        st.dataframe(frame, hide_index=True, width="stretch")
        st.caption("Each benchmark row: measured and modelled TTFT and TPOT (ms), and the model's band within the "
                   "fit's standard errors (low, high: each fitted coefficient moved by its error, combined).")
    if scatter.height:
        charts.show(whatif_charts.calibration_scatter(scatter, [p.id for p in registry.pools]))
    st.button("Use fitted coefficients in the candidate", key="wi.use_fitted", on_click=_use_fitted, args=(fits,))


def _fitted_label(fits: tuple[PoolFit, ...]) -> str:
    """What the fit did, as the status line says it: pools fitted, and pools that took a fit."""
    took = sum(1 for f in fits if f.carried_from)
    missed = sum(1 for f in fits if f.mfu is None)
    fitted = len(fits) - took - missed
    text = f"Fitted {fitted} pool{'s' if fitted != 1 else ''}"
    if took:
        text += ("; 1 more without evidence took its chip's fit" if took == 1 else
                 f"; {took} more without evidence took their chips' fits")
    if missed:
        text += f"; {missed} not fitted (no usable request)"
    return text


CALIBRATION_ERRORS: tuple[type[BaseException], ...] = (*USER_ERRORS, UnicodeDecodeError)
STATUS_MARK = {"fitted": "fitted", "not identifiable": "not identifiable", "no effect": "not identifiable",
               "at bound": "at bound", "registry": "registry"}
STATUS_COLOURS = {"fitted": "background-color: #d9f2d9", "not identifiable": "background-color: #fbe3c4",
                  "at bound": "background-color: #fff3b0"}


def _coefficients(fits: tuple[PoolFit, ...], configured: dict[str, Any]) -> None:
    """One table per fit group: each coefficient's registry value, fitted value, status and standard error."""
    seen: set[tuple[str, ...]] = set()
    for f in fits:
        if not f.coefficients or f.group in seen or f.carried_from:
            continue
        seen.add(f.group)
        st.markdown(f"**Coefficients of {', '.join(f.group)}**" + (" (one fit: same chip and engine)"
                                                                    if len(f.group) > 1 else ""))
        mfu = next((c.prior for c in f.coefficients if c.name == "mfu"), None)
        table = pl.DataFrame([{
            "coefficient": c.name, "registry": mfu if c.prior is None and c.name == "mfu_decode" else c.prior,
            "fitted": c.value if c.value is not None else f.mfu, "status": STATUS_MARK[c.status],
            "± (standard error)": c.error(),
            "what it means": c.describe()} for c in f.coefficients], strict=False).to_pandas()
        st.dataframe(table.style.map(lambda v: STATUS_COLOURS.get(str(v), ""), subset=["status"]), hide_index=True,
                     width="stretch", column_config={"registry": st.column_config.NumberColumn(format="%.4g"),
                                                     "fitted": st.column_config.NumberColumn(format="%.4g")})
    st.caption("Not identifiable: the evidence cannot tell this coefficient from another (or it has no effect "
               "on it), so the registry's value is kept. A fit on one TP degree cannot separate the engine's "
               "time per step from a collective hop's latency, nor often its time per running sequence from the "
               "serial share of memory and compute; rows at two TP degrees can.")


def _scatter_none() -> pl.DataFrame:
    return pl.DataFrame(schema={"pool": pl.String, "observed": pl.Float64, "predicted": pl.Float64})


def _base(registry: Registry) -> Candidate:
    """The edited candidate, or the registry's values when it does not load."""
    candidate, _, _ = check_form(whatif_form.read_form(registry), registry)
    return candidate or Candidate(name="registry")


def _scatter(traffic: pl.DataFrame, registry: Registry, base: Candidate, fits: tuple[PoolFit, ...]) -> pl.DataFrame:
    """Model TTFT of every observed request at the fitted coefficients, replayed on its observed pool."""
    if "obs_pool" not in traffic.columns or not fits:
        return _scatter_none()
    pools = dict(base.pools)
    for f in fits:
        if f.mfu is not None:
            pools[f.pool] = dataclasses.replace(pools.get(f.pool, PoolOverride()), **f.values())  # type: ignore[arg-type]
    # replayed on their observed pools, the fitted pools' requests alone give the same times, sooner
    observed = traffic.filter(pl.col("obs_pool").is_in([f.pool for f in fits]))
    fitted = dataclasses.replace(base, name="fitted", policy="observed", policy_options={}, pools=pools)
    rows = run_replay(fitted, observed, registry, 0).requests
    keys = [c for c in ("trace", "seq") if c in rows.columns and c in observed.columns]
    got = rows.select(*keys, "pool", pl.col("ttft_s").alias("predicted")).join(
        observed.select(*keys, pl.col("obs_ttft_s").alias("observed")), on=keys).select("pool", "observed", "predicted")
    got = got.drop_nulls().filter((pl.col("observed") > 0) & (pl.col("predicted") > 0))
    return pl.concat([g.sample(min(g.height, SCATTER_POINTS), seed=0) for _, g in got.group_by("pool")]) \
        if got.height else got


def _use_fitted(fits: tuple[PoolFit, ...]) -> None:
    """Callback: put the fitted coefficients into the editor's pool fields."""
    for f in fits:
        for name, value in rounded(f).items():
            st.session_state[whatif_form.key(f.pool, name)] = value
    st.session_state["wi.fitted_note"] = f"The fitted coefficients of {', '.join(f.pool for f in fits)} are in the " \
                                         "candidate on the What-if tab."
    st.toast(st.session_state["wi.fitted_note"])


def capacity(registry: Registry, candidate: Candidate | None) -> None:
    """Closed-loop benchmark curves (TTFT and TPOT against concurrency) of one replica of each pool."""
    st.caption("One replica of each pool, run closed-loop at fixed concurrency as `hetpool replay bench` (and "
               "`vllm bench serve --max-concurrency`) does, with the candidate's values.")
    specs = pools_by_id(registry, candidate or Candidate(name="registry"))
    st.session_state.setdefault("wi.bench_pools", list(specs))
    st.session_state.setdefault("wi.bench_concurrency", "1, 2, 4, 8, 16, 32, 64")
    c1, c2, c3, c4 = st.columns([3, 2, 1, 1])
    chosen = c1.multiselect("Pools", list(specs), key="wi.bench_pools")
    levels_text = c2.text_input("Concurrency levels", key="wi.bench_concurrency")
    isl = int(c3.number_input("Prompt tokens", key="wi.bench_isl", value=1024, step=128))
    osl = int(c4.number_input("Output tokens", key="wi.bench_osl", value=128, step=16))
    try:
        levels = concurrency_levels(levels_text)
    except ValueError as exc:
        st.error(f"Concurrency levels: {exc}")
        return
    if st.button("Run the benchmark", key="wi.bench_run", disabled=not chosen):
        rows = []
        with st.status("Benchmarking…", expanded=True) as status:
            bar = st.progress(0.0)
            try:
                for k, pool in enumerate(chosen):
                    for c in levels:
                        bar.progress(k / len(chosen), text=f"{pool} at concurrency {c}")
                        point = closed_loop(specs[pool], c, isl, osl, default_requests(c))
                        rows.append({"pool": pool, **point.__dict__})
            except USER_ERRORS as exc:
                status.update(label="The benchmark could not run", state="error")
                st.error(str(exc))
                return
            status.update(label=f"Benchmarked {len(chosen)} pools at {len(levels)} levels", state="complete",
                          expanded=False)
        st.session_state["wi.bench"] = pl.DataFrame(rows)
    table = st.session_state.get("wi.bench")
    if table is not None and table.height:
        charts.show(whatif_charts.bench_curves(table, [p.id for p in registry.pools]))
        st.dataframe(table, hide_index=True, width="stretch")


def sweep(registry: Registry, candidate: Candidate | None, pick: Pick | None) -> None:
    """A small grid over the candidate: the cost-against-p99 front, a chosen point, and using it."""
    st.caption("Replays every point of a small grid over the candidate on the chosen traffic. A point is on the "
               "front when no other is at least as good on busy cost, provisioned cost and p99 TTFT at once.")
    if candidate is None or pick is None:
        st.info("A valid candidate and traffic on the What-if tab come first.")
        return
    specs = [p.id for p in registry.pools if p.serving]
    st.session_state.setdefault("wi.sweep_policies", [candidate.policy])
    st.session_state.setdefault("wi.sweep_values", "1, 2, 4")
    c1, c2, c3, c4 = st.columns(4)
    policies = c1.multiselect("Policies", [p for p in POLICIES if p != "pd_split"], key="wi.sweep_policies")
    pool = c2.selectbox("Pool", specs, key="wi.sweep_pool")
    field = c3.selectbox("Field", SWEEP_FIELDS, key="wi.sweep_field")
    values_text = c4.text_input("Values", key="wi.sweep_values")
    try:
        values = yaml.safe_load(f"[{values_text}]")
    except yaml.YAMLError:
        values = None
    if not isinstance(values, list):
        st.error(f"Values: expected values separated by commas, got {values_text!r}")
        return
    params: dict[str, Any] = {f"pools.{pool}.{field}": values}
    if policies:
        params = {"policy": policies, **params}
    try:
        grid = load_grid_text(yaml.safe_dump({"parameters": params}, sort_keys=False), registry, "grid")
    except GridError as exc:
        for p in exc.problems:
            st.error(str(p))
        return
    if grid.size > MAX_POINTS:
        st.error(f"{grid.size} points is more than this page runs ({MAX_POINTS}); use `hetpool replay sweep`.")
        return
    points = expand(grid, candidate)
    if st.button(f"Sweep {grid.size} points on {pick.label}", key="wi.sweep_run"):
        with st.status("Sweeping…", expanded=True) as status:
            bar = st.progress(0.0)
            try:
                traffic = pick.load()
                telemetry = None if candidate.faults.mode == "off" else data.fault_telemetry(
                    cache.db_path(), traffic.first_ms, traffic.last_ms, candidate.faults.window_days)
                table = run_sweep(points, traffic.frame, registry, int(st.session_state.get("wi.seed", 0)),
                                  progress=_progress(bar), history=traffic.history, telemetry=telemetry)
            except USER_ERRORS as exc:
                status.update(label="The sweep could not run", state="error")
                st.error(str(exc))
                return
            status.update(label=f"Swept {grid.size} points", state="complete", expanded=False)
        labels = [", ".join(f"{k.removeprefix('pools.')}={v}" for k, v in s.items()) for s, _ in points]
        st.session_state["wi.sweep"] = (table.with_columns(pl.Series("label", labels)), dict(zip(
            labels, (c for _, c in points), strict=True)))
    kept = st.session_state.get("wi.sweep")
    if kept is not None:
        _front(kept[0], kept[1], registry)


def _front(table: pl.DataFrame, candidates: dict[str, Candidate], registry: Registry) -> None:
    front = table.filter(pl.col("pareto")).sort("busy_cost_usd")
    chosen = st.selectbox("Chosen point (on the front)", front["label"].to_list(), key="wi.sweep_chosen",
                          help="The cheapest point on the front is chosen first.")
    charts.show(whatif_charts.pareto(table, chosen))
    st.dataframe(table.select("label", "busy_cost_usd", "provisioned_cost_usd", "ttft_p99", "sla_violation_rate",
                              "pareto").sort("busy_cost_usd"), hide_index=True, width="stretch", column_config={
        "busy_cost_usd": st.column_config.NumberColumn("busy cost", format="$%.2f"),
        "provisioned_cost_usd": st.column_config.NumberColumn("provisioned cost", format="$%.2f"),
        "ttft_p99": st.column_config.NumberColumn("p99 TTFT (s)", format="%.3f"),
        "sla_violation_rate": st.column_config.NumberColumn("SLA violations", format="percent")})
    if chosen is not None:
        st.button("Use the chosen point as the candidate", key="wi.sweep_use", on_click=_use_point,
                  args=(registry, candidates[chosen]))


def _use_point(registry: Registry, candidate: Candidate) -> None:
    """Callback: load a sweep point into the editor."""
    whatif_form.load_form(form_of(registry, dataclasses.replace(candidate, name=candidate.name.split("[")[0])))
    st.toast("The chosen point is the candidate on the What-if tab now.")
