"""Altair chart builders of the console, all drawn with one theme and one colour per pool; bar charts here,
time series in timecharts."""

from __future__ import annotations

import math

import altair as alt
import polars as pl
import streamlit as st

from canonical.timeunits import DAY_MS, HOUR_MS, MINUTE_MS

THEME = "hetpool"
# Colour-blind-safe categorical palette (Okabe-Ito); pools keep their colour on every page.
PALETTE = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000"]
SEVERITY_SHAPES = {"fatal": "diamond", "recoverable": "circle", "informational": "triangle-up", "unknown": "square"}
CHART_HEIGHT = 220
BAR_ROW = 34      # px per bar of a horizontal bar chart
BAR_SIZE = 20     # px thickness of one bar, whatever the number of pools
BARS_MIN = 90     # px of the plot of a bar chart, so one or two pools still get a readable chart
# Chart buckets: the finest of these steps that gives at most MAX_POINTS buckets over the window.
STEPS_MS = (MINUTE_MS, 5 * MINUTE_MS, 15 * MINUTE_MS, HOUR_MS, 3 * HOUR_MS, 6 * HOUR_MS, 12 * HOUR_MS, DAY_MS)
MAX_POINTS = 200
LABEL_GAP = 8     # px at least between two tick labels of an axis
TABLE_ROW = 35    # px of a row of st.dataframe


@alt.theme.register(THEME, enable=True)
def _theme() -> alt.theme.ThemeConfig:
    return {
        "config": {
            "font": "Inter, Segoe UI, Helvetica, Arial, sans-serif",
            "view": {"stroke": "transparent"},
            "axis": {"labelFontSize": 11, "titleFontSize": 11, "gridColor": "#EEEEEE", "domainColor": "#BBBBBB",
                     "tickColor": "#BBBBBB", "titleFontWeight": "normal"},
            # numbers and times: drop labels until a gap of LABEL_GAP px parts neighbours ("95%100%" reads as one)
            "axisQuantitative": {"labelOverlap": "greedy", "labelSeparation": LABEL_GAP},
            "axisTemporal": {"labelOverlap": "greedy", "labelSeparation": LABEL_GAP},
            "legend": {"labelFontSize": 11, "titleFontSize": 11, "orient": "bottom", "titleFontWeight": "normal"},
            "title": {"fontSize": 13, "anchor": "start", "fontWeight": "bold", "subtitleFontSize": 11,
                      "subtitleColor": "#555555"},
            "range": {"category": PALETTE},
            "line": {"strokeWidth": 1.8},
        }
    }


def bucket_ms(length_ms: int) -> int:
    """The bucket of a chart over a window of this length: the finest of STEPS_MS giving at most MAX_POINTS
    buckets (1 h -> 1 min, 6 h -> 5 min, 24 h -> 15 min, 7 d -> 1 h), whole days beyond."""
    for step in STEPS_MS:
        if length_ms <= step * MAX_POINTS:
            return step
    return DAY_MS * math.ceil(length_ms / (DAY_MS * MAX_POINTS))


def pool_scale(pools: list[str], everyone: list[str] | None = None) -> alt.Scale:
    """A colour scale over `pools` only (so a legend lists the pools shown), each pool keeping the colour of
    its place in `everyone` (the registry's pools), so a filter never recolours a pool."""
    order = list(everyone) if everyone is not None else list(pools)
    order += [p for p in pools if p not in order]
    colour = {p: PALETTE[i % len(PALETTE)] for i, p in enumerate(order)}
    domain = [p for p in order if p in set(pools)]
    return alt.Scale(domain=domain, range=[colour[p] for p in domain])


def with_time(df: pl.DataFrame, column: str = "t") -> pl.DataFrame:
    """Epoch milliseconds to UTC datetimes, which Altair draws as a time axis."""
    return df.with_columns(pl.from_epoch(column, time_unit="ms").dt.replace_time_zone("UTC").alias("time"))


Drawable = alt.Chart | alt.LayerChart | alt.FacetChart | alt.HConcatChart | alt.VConcatChart


def show(chart: Drawable) -> None:
    """Render with the project theme (not Streamlit's) at full width, as SVG so that every chart is drawn the
    same way whatever its number of points (and its plot can be measured in a browser).

    A single or layered view fits its width only: under Streamlit's default fit, a chart's height is its
    whole height, so the title, legend and axes squeeze the plot of a short chart to a sliver."""
    svg = chart.copy(deep=False)
    svg.usermeta = {"embedOptions": {"renderer": "svg"}}
    if isinstance(svg, alt.Chart | alt.LayerChart):
        svg.autosize = alt.AutoSizeParams(type="fit-x", contains="padding")
    st.altair_chart(svg, width="stretch", theme=None)


def table_height(rows: int) -> int:
    """Height in px of an st.dataframe that shows its header and `rows` rows whole, without a scrollbar."""
    return TABLE_ROW * (rows + 1) + 3


def bars_height(rows: int) -> int:
    """Plot height of a horizontal bar chart with this many bars."""
    return max(BARS_MIN, BAR_ROW * rows)


def reliability_floor(values: list[float]) -> float:
    """Where the reliability axis starts: 5 points below the worst pool, on a multiple of 5 %, so 95.8 % and
    100 % stay apart; 0 when a pool is below 5 %."""
    worst = min(values, default=1.0)
    return max(0.0, math.floor((worst - 0.05) * 20 + 1e-9) / 20)


def reliability_bars(df: pl.DataFrame, pools: list[str]) -> alt.LayerChart:
    """Reliability index per pool as horizontal bars, worst first, on an axis zoomed to the data with each
    value written at its bar; df has pool, index, healthy, observed."""
    worst_first = df.sort("index", "pool")
    lo = reliability_floor(worst_first["index"].to_list())
    data = worst_first.with_columns(pl.lit(lo).alias("floor")).to_pandas()
    order = worst_first["pool"].to_list()
    base = alt.Chart(data, title=alt.Title("Reliability index (worst first)",
                                           subtitle=f"axis from {lo:.0%}: the gap to 100 % is what failed"),
                     height=bars_height(len(order)))
    y = alt.Y("pool:N", title=None, sort=order)
    bars = base.mark_bar(size=BAR_SIZE).encode(
        x=alt.X("index:Q", title=None, scale=alt.Scale(domain=[lo, 1], clamp=True, nice=False),
                axis=alt.Axis(format="%", tickCount=5, labelFlush=False)),
        x2="floor:Q", y=y,
        color=alt.Color("pool:N", scale=pool_scale(order, pools), legend=None),
        tooltip=["pool:N", alt.Tooltip("index:Q", format=".2%", title="R"), "healthy:Q", "observed:Q"],
    )
    labels = base.mark_text(align="left", dx=4, fontSize=11).encode(
        x="index:Q", y=y, text=alt.Text("index:Q", format=".1%"))
    return bars + labels


def cost_split(df: pl.DataFrame, pools: list[str]) -> alt.Chart:
    """Busy against idle money per pool, stacked; df has pool, busy_cost, idle_cost."""
    long = df.select("pool", "busy_cost", "idle_cost").unpivot(
        index="pool", variable_name="kind", value_name="usd").with_columns(
        pl.col("kind").replace({"busy_cost": "busy", "idle_cost": "idle"}))
    shown = [p for p in pools if p in set(df["pool"].to_list())]
    return alt.Chart(long.to_pandas(), title="Money spent: busy against idle devices",
                     height=bars_height(df.height)).mark_bar(size=BAR_SIZE).encode(
        x=alt.X("sum(usd):Q", title="USD", axis=alt.Axis(format="$,.0f")),
        y=alt.Y("pool:N", title=None, sort=shown),
        color=alt.Color("kind:N", scale=alt.Scale(domain=["busy", "idle"], range=[PALETTE[0], "#BBBBBB"]),
                        title=None),
        tooltip=["pool:N", "kind:N", alt.Tooltip("sum(usd):Q", format="$,.2f", title="USD")],
    )
