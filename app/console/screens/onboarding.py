"""Onboarding: per pool being onboarded, its stage progress, the checklist with evidence, and detail charts."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import altair as alt
import polars as pl
import streamlit as st

from app.console import cache, charts, filters, links, onboarding_data, onboarding_evidence, tables, timecharts
from app.console.safe import md
from onboarding import Track

STATUS_COLOURS = {"PASS": "background-color: #d9f2d9", "FAIL": "background-color: #f8d0d0",
                  "PENDING": "background-color: #f2f2f2"}
ABOUT = ("Stages from device abstraction to routine operations; a stage is reached when every checklist item of "
         "it and of the stages before it passes, on the day its last evidence was produced. Items are judged from "
         "evidence files (`hetpool onboarding add-evidence`, or named in the registry), stored telemetry, stored "
         "replays and signed-off manual checks. The sidebar's pool filter applies; its window does not: "
         "onboarding is counted from the registry's start date to the newest sample.")


def render() -> None:
    """Draw a card per pool, then the detail of the chosen one."""
    st.title("Onboarding")
    st.caption(ABOUT)
    path = cache.db_path()
    everyone = onboarding_data.onboarding_tracks(path)
    if not everyone:
        st.info("No pool is being onboarded: every pool of the registry is declared in production, with no "
                "checklist evidence. Load a registry with `hetpool registry load examples/fleet.yaml`.")
        return
    picked = filters.narrowed()
    found = [t for t in everyone if picked is None or t.pool in picked]
    if not found:
        st.info(f"None of the pools picked in the sidebar is being onboarded; these are: "
                f"{', '.join(md(t.pool) for t in everyone)}.")
        return
    if len(found) < len(everyone):
        st.caption(f"The pools picked in the sidebar: {len(found)} of the {len(everyone)} pools being onboarded.")
    for t in found:
        _card(t)
    onboarding_evidence.form(path, [t.pool for t in found])
    # open on the first pool with evidence files: that is where the charts have something to show
    first = next((k for k, t in enumerate(found) if any(i.files for i in t.items)), 0)
    chosen = st.selectbox("Detail of pool", [t.pool for t in found], index=first, key="onboarding_detail")
    _detail(next(t for t in found if t.pool == chosen), onboarding_data.onboarding_detail(path, chosen))


def _card(t: Track) -> None:
    with st.container(border=True):
        started = t.started.isoformat() if t.started else "no start date"
        st.markdown(f"**{md(t.pool)}** · {md(t.chip)} ({md(t.vendor)}) · started {started} · "
                    f"declared stage {t.declared}")
        if t.tracked:
            st.progress(t.reached / len(t.stages), text=f"Stage: {t.stage_title} · {t.reached} of "
                                                        f"{len(t.stages)} stages done")
        met = t.bringup()[1]
        (st.success if met else st.warning if met is False else st.caption)(t.bar_text().capitalize())
        reached = "; ".join(f"{s.title} on day {s.days:.1f}" for s in t.stages if s.days is not None)
        if reached:
            st.caption(f"Reached: {reached}.")
        rows = [{"stage": next(s.title for s in t.stages if s.id == i.stage), "item": i.title,
                 "status": i.status.upper(), "reason": i.reason,
                 "evidence": ", ".join(Path(n).name for _, n in i.files), "when": _day(i.at_ms)} for i in t.items]
        tables.wrapped(pl.DataFrame(rows), lambda v: STATUS_COLOURS.get(v, ""))


def _detail(t: Track, detail: dict[str, Any]) -> None:
    st.subheader(f"{t.pool}: evidence")
    if "curves" in detail:
        _loss_chart(detail["curves"], detail["deviations"])
    if "bench" in detail and not detail["bench"].is_empty():
        st.markdown("**Serving benchmark against the pool's model** (medians, ms)")
        st.dataframe(detail["bench"].select("line", "isl", "osl", "concurrency", "ttft_ms", "model_ttft_ms",
                                            "tpot_ms", "model_tpot_ms", "error"),
                     hide_index=True, width="stretch", column_config={
                         "model_ttft_ms": st.column_config.NumberColumn(format="%.1f"),
                         "model_tpot_ms": st.column_config.NumberColumn(format="%.1f"),
                         "error": st.column_config.NumberColumn(
                             format="percent", help="the larger of the TTFT and TPOT errors against the model")})
    memory: pl.DataFrame = detail.get("memory", pl.DataFrame())
    if not memory.is_empty():
        frame = timecharts.stamped(memory.with_columns(device=pl.col("node") + "/" + pl.col("device"),
                                                       gb=pl.col("used") / 1e9), "bucket")
        charts.show(alt.Chart(frame.to_pandas(), title="HBM used per device, hourly mean (GB)",
                              height=charts.CHART_HEIGHT).mark_line().encode(
            x=timecharts.time_x(), y=alt.Y("gb:Q", title=None), color=alt.Color("device:N", title="device"),
            tooltip=[alt.Tooltip("when:N", title="time (UTC)"),
                     "device:N", alt.Tooltip("gb:Q", format=",.1f")]))
    unmapped: pl.DataFrame = detail.get("unmapped", pl.DataFrame())
    if "unmapped" in detail:
        st.markdown("**Families the exporter delivers that no profile maps** (from its `hetpool check` report)")
        if unmapped.is_empty():
            st.caption("None: every family is mapped or ignored by a profile.")
        else:
            st.caption("Map them in a profile (`--profiles-dir`), or name them under its `ignore`, then check the "
                       "exporter again.")
            st.dataframe(unmapped.select("name", "type", "samples", "profile", "reason"), hide_index=True,
                         width="stretch")
    if "stability" in detail:
        _stability(t, *detail["stability"])
    for item, role, name, body in detail.get("files", []):
        st.download_button(f"{item} · {role}: {Path(name).name}", body, file_name=Path(name).name,
                           mime="application/json" if role == "report" else "text/csv",
                           key=f"ev-{t.pool}-{item}-{role}")


def _stability(t: Track, trend: pl.DataFrame, start_ms: int, bound: float) -> None:
    """Each device's memory trend over the sustained run the stability item judges, the name linking its page."""
    st.markdown("**Long-run stability per device**")
    st.caption(f"Sustained operation since {dt.datetime.fromtimestamp(start_ms / 1000, dt.UTC):%Y-%m-%d %H:%M} "
               f"UTC (the end of the hour of the last fatal error, or the first sample); growth is the rise of a "
               f"least-squares line through the device's hourly mean HBM use over that span, divided by its mean "
               f"use, and a device above {bound:.0%} leaks. A device with fewer than three hourly points is not "
               "listed.")
    if trend.is_empty():
        st.info("No device has three hourly points of HBM use in the sustained run yet.")
        return
    table, config = links.linked(trend.with_columns(leaks=pl.col("growth") > bound), t.pool)
    st.dataframe(table, hide_index=True, width="stretch", column_config={
        **config, "points": st.column_config.NumberColumn("hourly points", format="%d"),
        "growth": st.column_config.NumberColumn(format="percent")})


def _loss_chart(curves: pl.DataFrame, dev: pl.DataFrame) -> None:
    base = alt.Chart(curves.to_pandas(), title="Regression: loss, baseline against candidate",
                     height=charts.CHART_HEIGHT)
    lines = base.mark_line().encode(x=alt.X("step:Q"), y=alt.Y("loss:Q", scale=alt.Scale(zero=False)),
                                    color=alt.Color("curve:N", title=None), tooltip=["curve:N", "step:Q", "loss:Q"])
    keys = alt.Chart(dev.to_pandas()).mark_rule(strokeDash=[3, 3], color="#888888").encode(
        x="step:Q", tooltip=["step:Q", "baseline:Q", "candidate:Q", alt.Tooltip("deviation:Q", format=".1%")])
    charts.show(lines + keys)
    st.dataframe(dev, hide_index=True, width="stretch", column_config={
        "deviation": st.column_config.NumberColumn(format="percent", help="|candidate - baseline| / baseline")})


def _day(ms: int | None) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).strftime("%Y-%m-%d") if ms is not None else ""


if __name__ == "__main__":
    render()
