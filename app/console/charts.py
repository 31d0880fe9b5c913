"""Altair chart builders of the console, all drawn with one theme and one colour per pool."""

from __future__ import annotations

import altair as alt
import polars as pl
import streamlit as st

THEME = "hetpool"
# Colour-blind-safe categorical palette (Okabe-Ito); pools keep their colour on every page.
PALETTE = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000"]
SEVERITY_SHAPES = {"fatal": "diamond", "recoverable": "circle", "informational": "triangle-up", "unknown": "square"}
CHART_HEIGHT = 220


@alt.theme.register(THEME, enable=True)
def _theme() -> alt.theme.ThemeConfig:
    return {
        "config": {
            "font": "Inter, Segoe UI, Helvetica, Arial, sans-serif",
            "view": {"stroke": "transparent"},
            "axis": {"labelFontSize": 11, "titleFontSize": 11, "gridColor": "#EEEEEE", "domainColor": "#BBBBBB",
                     "tickColor": "#BBBBBB", "titleFontWeight": "normal"},
            "legend": {"labelFontSize": 11, "titleFontSize": 11, "orient": "bottom", "titleFontWeight": "normal"},
            "title": {"fontSize": 13, "anchor": "start", "fontWeight": "bold"},
            "range": {"category": PALETTE},
            "line": {"strokeWidth": 1.8},
        }
    }


def pool_scale(pools: list[str]) -> alt.Scale:
    """A colour scale that gives each pool of the registry the same colour everywhere."""
    return alt.Scale(domain=pools, range=[PALETTE[i % len(PALETTE)] for i in range(len(pools))])


def with_time(df: pl.DataFrame, column: str = "t") -> pl.DataFrame:
    """Epoch milliseconds to UTC datetimes, which Altair draws as a time axis."""
    return df.with_columns(pl.from_epoch(column, time_unit="ms").dt.replace_time_zone("UTC").alias("time"))


def show(chart: alt.Chart | alt.LayerChart | alt.FacetChart | alt.HConcatChart | alt.VConcatChart) -> None:
    """Render with the project theme (not Streamlit's) at full width."""
    st.altair_chart(chart, width="stretch", theme=None)


def lines_by_pool(df: pl.DataFrame, title: str, fmt: str, pools: list[str]) -> alt.Chart:
    """One line per pool over time; df has t, pool, value."""
    data = with_time(df).select("time", "pool", "value").to_pandas()
    return alt.Chart(data, title=title, height=CHART_HEIGHT).mark_line().encode(
        x=alt.X("time:T", title=None),
        y=alt.Y("value:Q", title=None, axis=alt.Axis(format=fmt)),
        color=alt.Color("pool:N", scale=pool_scale(pools), title="pool"),
        tooltip=[alt.Tooltip("time:T", format="%Y-%m-%d %H:%M"), "pool:N", alt.Tooltip("value:Q", format=fmt)],
    )


def lines_by_device(df: pl.DataFrame, title: str, fmt: str = "~s", events: bool = False) -> alt.Chart:
    """A small chart of one metric, a line (for events a point) per device, "node" for node-wide series;
    df has t, device, value."""
    data = with_time(df).with_columns(
        pl.when(pl.col("device") == "").then(pl.lit("node")).otherwise(pl.col("device")).alias("device")
    ).select("time", "device", "value").to_pandas()
    chart = alt.Chart(data, title=title, height=CHART_HEIGHT // 2 + 40)
    mark = chart.mark_point(filled=True) if events else chart.mark_line(point=len(data) < 3)
    return mark.encode(
        x=alt.X("time:T", title=None),
        y=alt.Y("value:Q", title=None, axis=alt.Axis(format=fmt)),
        color=alt.Color("device:N", title="device"),
        tooltip=[alt.Tooltip("time:T", format="%Y-%m-%d %H:%M"), "device:N", alt.Tooltip("value:Q", format=",.4~g")],
    )


def errors_over_time(df: pl.DataFrame) -> alt.Chart:
    """One strip per pool and vendor, a mark per time bucket and error class; df has t, label, error_class, ..."""
    data = with_time(df).select("time", "label", "error_class", "severity", "events").to_pandas()
    rows = max(1, df["label"].n_unique())
    return alt.Chart(data, title="Error events by pool and class", height=max(120, 45 * rows)).mark_point(
        filled=True, opacity=0.85).encode(
        x=alt.X("time:T", title=None),
        y=alt.Y("label:N", title=None),
        size=alt.Size("events:Q", scale=alt.Scale(range=[60, 400]), legend=None),
        color=alt.Color("error_class:N", title="error class"),
        shape=alt.Shape("severity:N", title="severity",
                        scale=alt.Scale(domain=list(SEVERITY_SHAPES), range=list(SEVERITY_SHAPES.values()))),
        tooltip=[alt.Tooltip("time:T", format="%Y-%m-%d %H:%M"), "label:N", "error_class:N", "severity:N",
                 "events:Q"],
    ).configure_legend(orient="right")


def reliability_bars(df: pl.DataFrame, pools: list[str]) -> alt.Chart:
    """Reliability index per pool as horizontal bars; df has pool, index."""
    return alt.Chart(df.to_pandas(), title="Reliability index", height=28 * max(df.height, 1)).mark_bar().encode(
        x=alt.X("index:Q", title=None, scale=alt.Scale(domain=[0, 1]), axis=alt.Axis(format="%")),
        y=alt.Y("pool:N", title=None, sort=pools),
        color=alt.Color("pool:N", scale=pool_scale(pools), legend=None),
        tooltip=["pool:N", alt.Tooltip("index:Q", format=".2%"), "healthy:Q", "observed:Q"],
    )


def cost_split(df: pl.DataFrame, pools: list[str]) -> alt.Chart:
    """Busy against idle money per pool, stacked; df has pool, busy_cost, idle_cost."""
    long = df.select("pool", "busy_cost", "idle_cost").unpivot(
        index="pool", variable_name="kind", value_name="usd").with_columns(
        pl.col("kind").replace({"busy_cost": "busy", "idle_cost": "idle"}))
    return alt.Chart(long.to_pandas(), title="Money spent: busy against idle devices",
                     height=28 * max(df.height, 1) + 40).mark_bar().encode(
        x=alt.X("sum(usd):Q", title="USD", axis=alt.Axis(format="$,.0f")),
        y=alt.Y("pool:N", title=None, sort=pools),
        color=alt.Color("kind:N", scale=alt.Scale(domain=["busy", "idle"], range=[PALETTE[0], "#BBBBBB"]),
                        title=None),
        tooltip=["pool:N", "kind:N", alt.Tooltip("sum(usd):Q", format="$,.2f", title="USD")],
    )


def routing_mix(df: pl.DataFrame, pools: list[str]) -> alt.Chart:
    """Share of requests per serving pool over time, stacked to 100 %; df has t, pool, share, requests."""
    data = with_time(df).select("time", "pool", "share", "requests").to_pandas()
    domain = pools + sorted(set(df["pool"].to_list()) - set(pools))
    return alt.Chart(data, title="Routing mix (share of requests by serving pool)",
                     height=CHART_HEIGHT).mark_area().encode(
        x=alt.X("time:T", title=None),
        y=alt.Y("share:Q", title=None, stack="normalize", axis=alt.Axis(format="%")),
        color=alt.Color("pool:N", scale=pool_scale(domain), title="pool"),
        tooltip=[alt.Tooltip("time:T", format="%Y-%m-%d %H:%M"), "pool:N",
                 alt.Tooltip("share:Q", format=".1%"), "requests:Q"],
    )
