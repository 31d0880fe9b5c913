"""Altair builders of the Replay page, drawn with the console's theme and pool colours (app.console.charts)."""

from __future__ import annotations

import math

import altair as alt
import polars as pl

from app.console.charts import CHART_HEIGHT, PALETTE, pool_scale, with_time
from app.console.timecharts import time_x
from canonical.timeunits import DAY_MS

RUNS = alt.Scale(domain=["candidate", "baseline"], range=[PALETTE[0], "#999999"])
MEASURE_UNITS = {"TTFT": "TTFT (s)", "TPOT": "TPOT (s)", "e2e": "e2e (s)"}
STEPS = (1.0, 2.0, 5.0)  # the ticks of a log axis within each decade


def log_ticks(lo: float, hi: float, most: int = 6) -> list[float]:
    """Round values (1, 2, 5 times a power of ten) spanning [lo, hi] on a log axis, at most `most` of them: the
    ticks of a narrow chart, where every tick of a decade (0.3 0.4 0.5 ...) would run together."""
    if not lo > 0 or not hi >= lo:
        return []
    first, last = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    for steps in (STEPS, (1.0, 3.0), (1.0,)):
        ticks = [s * 10.0 ** e for e in range(first, last + 1) for s in steps if lo <= s * 10.0 ** e <= hi]
        if len(ticks) <= most:
            return ticks
    every = math.ceil(len(ticks) / most)  # decades alone, still too many: every few
    return ticks[::every]


def latency_cdfs(df: pl.DataFrame) -> list[alt.Chart]:
    """TTFT, TPOT and e2e CDFs with the candidate and baseline overlaid, a chart each (the page sets them side by
    side in columns, each as wide as its column); df has run, measure, q, value."""
    charts = []
    for measure, title in MEASURE_UNITS.items():
        part = df.filter((pl.col("measure") == measure) & (pl.col("value") > 0))
        ticks = log_ticks(float(part["value"].min() or 0), float(part["value"].max() or 0))  # type: ignore[arg-type]
        charts.append(alt.Chart(part.to_pandas(), title=f"{measure}: share of requests at or below",
                                height=CHART_HEIGHT).mark_line(interpolate="step-after").encode(
            x=alt.X("value:Q", title=title, scale=alt.Scale(type="log"),
                    axis=alt.Axis(values=ticks, format="~g") if ticks else alt.Axis(format="~g")),
            y=alt.Y("q:Q", title=None, axis=alt.Axis(format="%")),
            color=alt.Color("run:N", scale=RUNS, title=None),
            tooltip=["run:N", alt.Tooltip("value:Q", format=".3f", title=title),
                     alt.Tooltip("q:Q", format=".0%", title="share")]))
    return charts


PANEL_WIDTH = 340  # px of each of the candidate's and the baseline's panels, likewise


def _clock(df: pl.DataFrame) -> str:
    """24-hour labels, with the day when the run is longer than one."""
    span = int(df["t"].max() - df["t"].min()) if df.height else 0  # type: ignore[operator, arg-type]
    return "%H:%M" if span <= DAY_MS else "%m-%d %H:%M"


def pool_over_time(df: pl.DataFrame, column: str, title: str, pools: list[str]) -> alt.FacetChart:
    """One line per pool over time, the candidate's panel beside the baseline's; df has run, t, pool, column."""
    data = with_time(df.filter(pl.col(column).is_not_null())).select("run", "time", "pool", column).to_pandas()
    return alt.Chart(data, height=CHART_HEIGHT - 40, width=PANEL_WIDTH).mark_line().encode(
        x=time_x(_clock(df)),
        y=alt.Y(f"{column}:Q", title=None, axis=alt.Axis(format="%")),
        color=alt.Color("pool:N", scale=pool_scale(pools), title="pool"),
        tooltip=[alt.Tooltip("utcyearmonthdatehoursminutes(time):T", format="%Y-%m-%d %H:%M", title="time (UTC)"),
                 "pool:N", alt.Tooltip(f"{column}:Q", format=".1%")],
    ).facet(column=alt.Column("run:N", title=None, sort=["candidate", "baseline"]), title=title)


def routing_share(df: pl.DataFrame, pools: list[str]) -> alt.FacetChart:
    """Share of arrivals per pool over time, stacked to 100 %, candidate beside baseline; df has run, t, pool,
    share, requests."""
    arrived = df.group_by("run", "t").agg(pl.col("requests").sum().alias("all"))
    data = with_time(df.join(arrived, on=["run", "t"]).filter(pl.col("all") > 0)).select(
        "run", "time", "pool", "share", "requests").to_pandas()  # buckets after the last arrival have no mix
    domain = pools + sorted(set(df["pool"].to_list()) - set(pools))
    return alt.Chart(data, height=CHART_HEIGHT - 40, width=PANEL_WIDTH).mark_area().encode(
        x=time_x(_clock(df)),
        y=alt.Y("share:Q", title=None, stack="normalize", axis=alt.Axis(format="%")),
        color=alt.Color("pool:N", scale=pool_scale(domain), title="pool"),
        tooltip=[alt.Tooltip("utcyearmonthdatehoursminutes(time):T", format="%Y-%m-%d %H:%M", title="time (UTC)"),
                 "pool:N", alt.Tooltip("share:Q", format=".1%"), "requests:Q"],
    ).facet(column=alt.Column("run:N", title=None, sort=["candidate", "baseline"]),
            title="Routing share (arrivals by serving pool)")


def bench_curves(df: pl.DataFrame, pools: list[str]) -> alt.HConcatChart:
    """p50 TTFT and TPOT against concurrency per pool; df has pool, concurrency, ttft_ms_p50, tpot_ms_p50."""
    data = df.to_pandas()
    charts = []
    for column, title in (("ttft_ms_p50", "TTFT p50 (ms)"), ("tpot_ms_p50", "TPOT p50 (ms)")):
        charts.append(alt.Chart(data, title=title, height=CHART_HEIGHT, width=420).mark_line(point=True).encode(
            x=alt.X("concurrency:Q", title="concurrency (clients at once)", scale=alt.Scale(type="log", base=2)),
            y=alt.Y(f"{column}:Q", title=None),
            color=alt.Color("pool:N", scale=pool_scale(pools), title="pool"),
            tooltip=["pool:N", "concurrency:Q", alt.Tooltip(f"{column}:Q", format=".1f", title=title),
                     alt.Tooltip("output_tok_s:Q", format=",.0f", title="output tok/s")]))
    return alt.hconcat(*charts)


def pareto(df: pl.DataFrame, chosen: str | None) -> alt.LayerChart:
    """Busy cost against p99 TTFT of every sweep point, the front joined, the chosen point ringed; df has
    candidate, busy_cost_usd, ttft_p99, pareto, label."""
    data = df.with_columns(pl.when(pl.col("pareto")).then(pl.lit("on the front")).otherwise(pl.lit("beaten"))
                           .alias("front")).to_pandas()
    base = alt.Chart(data, title="Busy cost against p99 TTFT (lower left is better)", height=CHART_HEIGHT + 60)
    x = alt.X("busy_cost_usd:Q", title="busy cost (USD)", axis=alt.Axis(format="$,.2f"), scale=alt.Scale(zero=False))
    y = alt.Y("ttft_p99:Q", title="p99 TTFT (s)", scale=alt.Scale(zero=False), axis=alt.Axis(format=".3f"))
    points = base.mark_circle(size=90).encode(
        x=x, y=y, color=alt.Color("front:N", scale=alt.Scale(domain=["on the front", "beaten"],
                                                             range=[PALETTE[5], "#BBBBBB"]), title=None),
        tooltip=["label:N", alt.Tooltip("busy_cost_usd:Q", format="$,.2f"),
                 alt.Tooltip("provisioned_cost_usd:Q", format="$,.2f"), alt.Tooltip("ttft_p99:Q", format=".3f"),
                 alt.Tooltip("sla_violation_rate:Q", format=".2%")])
    line = base.transform_filter("datum.pareto").mark_line(color=PALETTE[5], strokeDash=[4, 3]).encode(
        x=x, y=y, order="busy_cost_usd:Q")
    ring = base.transform_filter(alt.datum.label == (chosen or "")).mark_point(
        size=420, shape="circle", strokeWidth=2.5, color="#000000").encode(x=x, y=y)
    text = base.transform_filter(alt.datum.label == (chosen or "")).mark_text(
        align="left", dx=14, dy=-10, fontWeight="bold").encode(x=x, y=y, text=alt.value("chosen"))
    return alt.LayerChart(layer=[line, points, ring, text])


def calibration_scatter(df: pl.DataFrame, pools: list[str]) -> alt.LayerChart:
    """Model TTFT at the fitted coefficients against observed TTFT, per pool, on log axes with the diagonal;
    df has pool, observed, predicted."""
    data = df.to_pandas()
    values = df.select(pl.min_horizontal(pl.col("observed").min(), pl.col("predicted").min()).alias("lo"),
                       pl.max_horizontal(pl.col("observed").max(), pl.col("predicted").max()).alias("hi")).row(0)
    lo, hi = max(1e-3, float(values[0])), float(values[1])
    scale = alt.Scale(type="log", domain=[lo, hi])
    dots = alt.Chart(data, title="Predicted against observed TTFT (s), at the fitted coefficients",
                     height=CHART_HEIGHT + 80, width=480).mark_circle(size=14, opacity=0.5).encode(
        x=alt.X("observed:Q", title="observed TTFT (s)", scale=scale),
        y=alt.Y("predicted:Q", title="model TTFT (s)", scale=scale),
        color=alt.Color("pool:N", scale=pool_scale(pools), title="pool"),
        tooltip=["pool:N", alt.Tooltip("observed:Q", format=".3f"), alt.Tooltip("predicted:Q", format=".3f")])
    diagonal = alt.Chart(pl.DataFrame({"observed": [lo, hi], "predicted": [lo, hi]}).to_pandas()).mark_line(
        color="#999999", strokeDash=[4, 3]).encode(x="observed:Q", y="predicted:Q")
    return alt.LayerChart(layer=[diagonal, dots])


def bench_fit(df: pl.DataFrame, pools: list[str]) -> alt.HConcatChart:
    """Model against measured TTFT and TPOT of every benchmark row at the fitted coefficients, on log axes with
    the diagonal; df has the columns of replay.calibrate.BenchCheck."""
    panels = []
    for what, measured, model in (("TTFT", "ttft_ms", "ttft_ms_model"), ("TPOT", "tpot_ms", "tpot_ms_model")):
        part = df.select("pool", "isl", "osl", "concurrency", pl.col(measured).alias("measured"),
                         pl.col(model).alias("model")).filter((pl.col("measured") > 0) & (pl.col("model") > 0))
        if part.height == 0:
            continue
        part = part.with_columns(((pl.col("model") / pl.col("measured") - 1) * 100).alias("error_pct"))
        both = pl.concat([part["measured"], part["model"]])
        lo, hi = float(both.min()) * 0.8, float(both.max()) * 1.25  # type: ignore[arg-type]
        scale = alt.Scale(type="log", domain=[lo, hi], nice=False)
        shown = sorted(set(part["pool"].to_list()), key=pools.index) if set(part["pool"]) <= set(pools) \
            else sorted(set(part["pool"].to_list()))
        dots = alt.Chart(part.to_pandas(), title=f"{what} (ms): model against each benchmark row",
                         height=CHART_HEIGHT + 40, width=320).mark_point(size=50, filled=True).encode(
            x=alt.X("measured:Q", title=f"measured {what} (ms)", scale=scale),
            y=alt.Y("model:Q", title=f"model {what} (ms)", scale=scale),
            color=alt.Color("pool:N", scale=pool_scale(shown, pools), title="pool"),
            shape=alt.Shape("isl:N", title="prompt tokens"),
            tooltip=["pool:N", "isl:Q", "osl:Q", "concurrency:Q", alt.Tooltip("measured:Q", format=".2f"),
                     alt.Tooltip("model:Q", format=".2f"), alt.Tooltip("error_pct:Q", format="+.1f",
                                                                       title="error (%)")])
        diagonal = alt.Chart(pl.DataFrame({"measured": [lo, hi], "model": [lo, hi]}).to_pandas()).mark_line(
            color="#999999", strokeDash=[4, 3]).encode(x="measured:Q", y="model:Q")
        panels.append(alt.LayerChart(layer=[diagonal, dots]))
    return alt.hconcat(*panels)


def runway_load(df: pl.DataFrame, dates: dict[str, object]) -> alt.LayerChart:
    """A pool's requests per day, observed, and its trend with the growth's band to the horizon, with the breaking
    date ruled and its earliest-to-latest span shaded; df has date, observed, trend, low, high (replay.runway.curves)
    and dates the pool's breaks_on, breaks_on_low and breaks_on_high (None where it holds)."""
    data = df.to_pandas()
    x = alt.X("date:T", title="date (UTC)", axis=alt.Axis(format="%Y-%m-%d"))
    base = alt.Chart(data, title="Requests per day: observed, trend and band", height=CHART_HEIGHT)
    layers: list[alt.Chart] = [
        base.mark_area(opacity=0.2, color=PALETTE[0]).encode(x=x, y=alt.Y("low:Q", title="requests per day"),
                                                              y2="high:Q"),
        base.mark_line(color=PALETTE[0]).encode(x=x, y="trend:Q", tooltip=[
            alt.Tooltip("date:T", format="%Y-%m-%d"), alt.Tooltip("trend:Q", format=",.0f"),
            alt.Tooltip("low:Q", format=",.0f"), alt.Tooltip("high:Q", format=",.0f")]),
        base.mark_point(color="#333333", filled=True, size=18).encode(x=x, y="observed:Q", tooltip=[
            alt.Tooltip("date:T", format="%Y-%m-%d"), alt.Tooltip("observed:Q", format=",")]),
    ]
    low, high, on = dates.get("breaks_on_low"), dates.get("breaks_on_high"), dates.get("breaks_on")
    if low is not None and high is not None:
        span = pl.DataFrame({"start": [low], "end": [high]}).to_pandas()
        layers.insert(0, alt.Chart(span).mark_rect(opacity=0.15, color=PALETTE[5]).encode(
            x="start:T", x2="end:T"))
    if on is not None:
        rule = pl.DataFrame({"date": [on], "label": [f"breaks on {on}"]}).to_pandas()
        layers.append(alt.Chart(rule).mark_rule(color=PALETTE[5], strokeWidth=2).encode(
            x="date:T", tooltip=["label:N"]))
    return alt.LayerChart(layer=layers)


def runway_violations(df: pl.DataFrame, tolerance: float) -> alt.LayerChart:
    """The share of a pool's requests missing their SLA at each replayed load, with the tolerance ruled; df has
    date, load, violation_rate (replay.runway.curves)."""
    data = df.to_pandas()
    points = alt.Chart(data, title="SLA violations against load", height=CHART_HEIGHT).mark_line(
        point=True, color=PALETTE[0]).encode(
        x=alt.X("load:Q", title="load (times the replayed week's)", scale=alt.Scale(zero=False)),
        y=alt.Y("violation_rate:Q", title="requests missing their SLA", axis=alt.Axis(format="%")),
        tooltip=[alt.Tooltip("date:T", format="%Y-%m-%d"), alt.Tooltip("load:Q", format=".3f"),
                 alt.Tooltip("violation_rate:Q", format=".2%")])
    limit = alt.Chart(pl.DataFrame({"tolerance": [tolerance]}).to_pandas()).mark_rule(
        color=PALETTE[5], strokeDash=[4, 4]).encode(y="tolerance:Q")
    return points + limit
