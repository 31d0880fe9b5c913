"""The Replay page's Plan tab: a model's feasible layouts per pool (table and TPOT against throughput per device)
and the memory breakdown of the chosen one; the numbers are `hetpool plan`'s (replay.planner)."""

from __future__ import annotations

import altair as alt
import polars as pl
import streamlit as st

from app.console import charts
from app.console.charts import CHART_HEIGHT, pool_scale
from app.exceptions import USER_ERRORS
from pool_registry import Registry
from replay.bench import concurrency_levels
from replay.planner import PlanReport, PlanSettings, Targets, memory_frame, plan_model, plans_frame

RESULT = "wi.plan"
TABLE_COLUMNS = ["pool", "layout", "replicas", "devices_per_replica", "concurrency", "weights_gb_per_device",
                 "kv_tokens_per_replica", "ttft_ms_p50", "ttft_ms_p99", "tpot_ms_p50", "tpot_ms_p99",
                 "output_tok_s_per_device", "usd_per_mtok", "mfu", "meets_targets"]


def tpot_against_throughput(df: pl.DataFrame, pools: list[str]) -> alt.Chart:
    """One point per fitting plan: TPOT p50 against output tokens/s per device, coloured by pool."""
    data = df.filter(pl.col("tpot_ms_p50").is_not_null()).select(
        "pool", "layout", "concurrency", "tpot_ms_p50", "output_tok_s_per_device", "usd_per_mtok",
        "meets_targets").to_pandas()
    shown = [p for p in pools if p in set(data["pool"])]
    return alt.Chart(data, title="TPOT against output tokens/s per device (each fitting layout and concurrency)",
                     height=CHART_HEIGHT + 60, width=560).mark_point(filled=True, size=60).encode(
        x=alt.X("output_tok_s_per_device:Q", title="output tokens/s per device"),
        y=alt.Y("tpot_ms_p50:Q", title="TPOT p50 (ms)"),
        color=alt.Color("pool:N", scale=pool_scale(shown, pools), title="pool"),
        shape=alt.Shape("meets_targets:N", title="meets targets"),
        tooltip=["pool:N", "layout:N", "concurrency:Q", alt.Tooltip("tpot_ms_p50:Q", format=".2f"),
                 alt.Tooltip("output_tok_s_per_device:Q", format=",.0f"), alt.Tooltip("usd_per_mtok:Q", format=".3f")])


def memory_bars(df: pl.DataFrame, title: str) -> alt.Chart:
    """One device's memory as a stacked bar: weights, KV cache, working memory and what is left free."""
    return alt.Chart(df.with_columns(device=pl.lit("per device")).to_pandas(), title=title, height=90,
                     width=560).mark_bar().encode(
        x=alt.X("gb:Q", title="GB (of the usable memory)", stack="zero"),
        y=alt.Y("device:N", title=None),
        color=alt.Color("part:N", sort=["weights", "KV cache", "working memory", "free"], title=None),
        order=alt.Order("order:Q"),
        tooltip=["part:N", alt.Tooltip("gb:Q", format=".2f")]).transform_calculate(
        order="indexof(['weights', 'KV cache', 'working memory', 'free'], datum.part)")


def _settings() -> PlanSettings | None:
    c1, c2, c3, c4, c5, c6 = st.columns(6)
    isl = int(c1.number_input("Prompt tokens", key="wi.plan_isl", value=1024, step=128, min_value=0))
    osl = int(c2.number_input("Output tokens", key="wi.plan_osl", value=128, step=16, min_value=1))
    context = int(c3.number_input("Context per sequence (0: prompt + output)", key="wi.plan_context", value=0,
                                  step=1024, min_value=0))
    text = c4.text_input("Concurrency levels", key="wi.plan_concurrency", value="1, 16, 64")
    ttft = float(c5.number_input("TTFT p50 target (ms, 0: none)", key="wi.plan_ttft", value=0.0, min_value=0.0))
    tpot = float(c6.number_input("TPOT p50 target (ms, 0: none)", key="wi.plan_tpot", value=0.0, min_value=0.0))
    try:
        levels = concurrency_levels(text)
    except ValueError as exc:
        st.error(f"Concurrency levels: {exc}")
        return None
    return PlanSettings(isl=isl, osl=osl, context=context or None, concurrency=levels,
                        targets=Targets(ttft or None, tpot or None))


def show(registry: Registry) -> None:
    """Pick a model and pools, plan, and show the feasible layouts, the chart and the chosen one's memory."""
    st.caption("Every TP x PP x EP layout of one replica of the model on each pool (with data-parallel attention, "
               "'dp', for a MoE model), its memory per device, and for those that fit, the closed-loop TTFT, TPOT, "
               "throughput and busy cost of `hetpool replay bench`, best first, as `hetpool plan` prints them.")
    c1, c2 = st.columns([1, 2])
    model = c1.selectbox("Model", [m.id for m in registry.models], key="wi.plan_model")
    pools = c2.multiselect("Pools", [p.id for p in registry.pools], key="wi.plan_pools",
                           default=[p.id for p in registry.pools])
    settings = _settings()
    if st.button("Plan", key="wi.plan_run", type="primary", disabled=settings is None or not pools or not model):
        try:
            with st.spinner("Planning…"):
                st.session_state[RESULT] = plan_model(registry, model, tuple(pools), settings)
        except USER_ERRORS as exc:
            st.error(str(exc))
            return
    report: PlanReport | None = st.session_state.get(RESULT)
    if report is not None:
        _report(report, registry)


def _report(report: PlanReport, registry: Registry) -> None:
    frame = plans_frame(report)
    for miss in report.misses:
        st.warning(f"Targets missed: {miss}")
    for w in report.walls:
        if frame.is_empty() or w.pool not in set(frame["pool"]):
            need = "more than any count of devices" if w.min_devices is None else f"at least {w.min_devices} devices"
            st.warning(f"Memory wall on {w.pool}: nothing fits; {report.model} needs {need}; the pool has "
                       f"{w.devices}.")
    if frame.is_empty():
        st.info(f"No layout of {report.model} fits any pool planned.")
        return
    st.markdown(f"**{frame.height} feasible layouts of {report.model}**, best first")
    st.dataframe(frame.select(TABLE_COLUMNS), hide_index=True, width="stretch")
    charts.show(tpot_against_throughput(frame, [p.id for p in registry.pools]))
    fitting = [p for p in report.plans if p.fits]
    labels = [f"{p.layout.pool} {p.layout.label} at concurrency {p.concurrency}" for p in fitting]
    chosen = st.selectbox("Memory breakdown of", labels, key="wi.plan_chosen")
    plan = fitting[labels.index(chosen)] if chosen in labels else fitting[0]
    m = plan.memory
    charts.show(memory_bars(memory_frame(plan), f"{chosen}: {m.used_gb:.1f} of {m.usable_gb:.1f} GB usable per "
                                                f"device"))
    st.dataframe(memory_frame(plan), hide_index=True)
    excluded = pl.DataFrame([{"pool": e.layout.pool, "layout": e.layout.label, "rule": e.rule, "reason": e.reason}
                             for e in report.excluded])
    if excluded.height:
        with st.expander(f"{excluded.height} layouts excluded by a divisibility rule"):
            st.dataframe(excluded, hide_index=True, width="stretch")
