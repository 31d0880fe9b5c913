"""Time series of the console: a UTC time axis on the window, gaps where buckets hold no data, the SLA line,
and severe error events and version changes marked on the series."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

import altair as alt
import polars as pl

from app.console.charts import CHART_HEIGHT, SEVERITY_SHAPES, pool_scale
from canonical.timeunits import DAY_MS

DEVICE_CHART_HEIGHT = CHART_HEIGHT // 2 + 40
EVENT_COLOUR, CHANGE_COLOUR, SLA_COLOUR = "#C00000", "#6A3D9A", "#444444"
EVENT_SCHEMA = {"t": pl.Int64, "pool": pl.String, "node": pl.String, "severity": pl.String, "events": pl.Float64,
                "codes": pl.String}
CHANGE_SCHEMA = {"ts": pl.Int64, "pool": pl.String, "node": pl.String, "device": pl.String,
                 "component": pl.String, "previous": pl.String, "version": pl.String}


def _utc(ms: int) -> alt.DateTime:
    """Epoch ms as a Vega-Lite UTC date-time (a bare number in a temporal domain is not read as epoch ms)."""
    d = dt.datetime.fromtimestamp(ms / 1000, dt.UTC)
    return alt.DateTime(year=d.year, month=d.month, date=d.day, hours=d.hour, minutes=d.minute,
                        seconds=d.second, milliseconds=d.microsecond // 1000, utc=True)


def time_x(fmt: str = "%m-%d %H:%M", domain: list[int] | None = None) -> alt.X:
    """A time axis in UTC (never the browser's zone) with 24-hour labels, over `domain` (epoch ms) if given."""
    scale = alt.Scale(type="utc", domain=[_utc(ms) for ms in domain]) if domain else alt.Scale(type="utc")
    return alt.X("time:T", title="time (UTC)", scale=scale, axis=alt.Axis(format=fmt))


@dataclass(frozen=True)
class Timeline:
    """The window a time series spans and its bucket, in epoch ms."""

    start_ms: int
    end_ms: int
    step_ms: int

    def time_format(self) -> str:
        """24-hour clock labels, with the day once the window is longer than one."""
        return "%H:%M" if self.end_ms - self.start_ms <= DAY_MS else "%m-%d %H:%M"

    def x(self) -> alt.X:
        """The time axis: UTC (never the browser's zone), 24-hour labels, spanning the whole window."""
        return time_x(self.time_format(), [self.start_ms, self.end_ms])

    def buckets(self) -> pl.DataFrame:
        """Every bucket start of the window: t."""
        first = self.start_ms - self.start_ms % self.step_ms
        return pl.DataFrame({"t": pl.int_ranges(first, self.end_ms, self.step_ms, eager=True).explode()},
                            schema={"t": pl.Int64})


@dataclass(frozen=True)
class Marks:
    """What to mark on a time series: severe error events (EVENT_SCHEMA) and version changes (CHANGE_SCHEMA)."""

    events: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=EVENT_SCHEMA))
    changes: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=CHANGE_SCHEMA))
    # the layers drawn for each timeline, built once: a page marks the same events on all its charts
    layers: dict[Timeline, list[alt.Chart]] = field(default_factory=dict, compare=False, repr=False)

    def subtitle(self) -> str:
        """The key to the marks this chart carries (empty without marks)."""
        parts = (["▼ fatal errors"] if self.events.height else []) + (
            ["◆ version changes"] if self.changes.height else [])
        return "   ".join(parts)  # the tooltips of the marks say which, where and what


def stamped(df: pl.DataFrame, column: str = "t") -> pl.DataFrame:
    """Epoch ms in `column` as the plotted `time` (a UTC datetime: 64-bit integers do not reach the browser
    as numbers) and a UTC `when` text for tooltips."""
    at = pl.from_epoch(column, time_unit="ms")
    return df.with_columns(at.dt.replace_time_zone("UTC").alias("time"),
                           at.dt.strftime("%Y-%m-%d %H:%M UTC").alias("when"))


def with_gaps(df: pl.DataFrame, tl: Timeline, by: str) -> pl.DataFrame:
    """df (t, `by`, value) with a null value in every bucket of the window a series has no data for, so a
    silent stretch breaks the line instead of being bridged."""
    if df.is_empty():
        return df
    grid = tl.buckets().join(df.select(by).unique(), how="cross")
    return grid.join(df, on=["t", by], how="left").sort(by, "t")


def _mark_layers(marks: Marks, tl: Timeline) -> list[alt.Chart]:
    """Vertical rules with a mark at the top for each severe event bucket and each version change."""
    if tl not in marks.layers:
        marks.layers[tl] = _build_mark_layers(marks, tl)
    return marks.layers[tl]


def _build_mark_layers(marks: Marks, tl: Timeline) -> list[alt.Chart]:
    layers: list[alt.Chart] = []
    if marks.events.height:
        ev = stamped(marks.events).to_pandas()
        base = alt.Chart(ev)
        tip = [alt.Tooltip("when:N", title="time (UTC)"), "pool:N", "node:N", "severity:N",
               alt.Tooltip("events:Q", format=",.0f"), "codes:N"]
        layers += [base.mark_rule(color=EVENT_COLOUR, strokeWidth=1.5, opacity=0.7).encode(x=tl.x(), tooltip=tip),
                   base.mark_point(shape="triangle-down", filled=True, size=110, color=EVENT_COLOUR, opacity=1)
                   .encode(x=tl.x(), y=alt.value(5), tooltip=tip)]
    if marks.changes.height:
        ch = stamped(marks.changes, "ts").with_columns(
            pl.format("{} → {}", "previous", "version").alias("change")).to_pandas()
        base = alt.Chart(ch)
        tip = [alt.Tooltip("when:N", title="time (UTC)"), "pool:N", "node:N", "device:N", "component:N",
               "change:N"]
        layers += [base.mark_rule(color=CHANGE_COLOUR, strokeWidth=1.5, strokeDash=[4, 3]).encode(
                       x=tl.x(), tooltip=tip),
                   base.mark_point(shape="diamond", filled=True, size=100, color=CHANGE_COLOUR, opacity=1)
                   .encode(x=tl.x(), y=alt.value(14), tooltip=tip)]
    return layers


def sla_labels(sla: dict[str, tuple[str, float | None]]) -> list[tuple[float, str]]:
    """Each distinct p99 TTFT target of the pools shown, with its label: the tiers, and the pools when the
    pools shown do not all share it."""
    by_target: dict[float, list[tuple[str, str]]] = {}
    for pool, (tier, target) in sla.items():
        if target is not None:
            by_target.setdefault(float(target), []).append((pool, tier))
    out = []
    for target, who in sorted(by_target.items()):
        tiers = ", ".join(sorted({tier for _, tier in who}))
        pools = "" if len(who) == len(sla) else f" ({', '.join(pool for pool, _ in who)})"
        out.append((target, f"SLA {tiers}: p99 {target:g} s{pools}"))
    return out


def _sla_layers(sla: dict[str, tuple[str, float | None]], tl: Timeline) -> list[alt.Chart]:
    """One dashed rule per distinct SLA target of the pools shown, labelled at the window's end."""
    labels = sla_labels(sla)
    if not labels:
        return []
    rows = pl.DataFrame({"value": [v for v, _ in labels], "t": [tl.end_ms] * len(labels),
                         "label": [text for _, text in labels]}, schema={"value": pl.Float64, "t": pl.Int64,
                                                                         "label": pl.String})
    base = alt.Chart(stamped(rows).to_pandas())
    y = alt.Y("value:Q", title=None)
    return [base.mark_rule(color=SLA_COLOUR, strokeDash=[6, 4], strokeWidth=1.5).encode(y=y, tooltip=["label:N"]),
            base.mark_text(align="right", baseline="bottom", dx=-4, dy=-3, color=SLA_COLOUR, fontSize=11).encode(
                x=tl.x(), y=y, text="label:N")]


def lines_by_pool(df: pl.DataFrame, title: str, fmt: str, pools: list[str], everyone: list[str], tl: Timeline,
                  marks: Marks | None = None,
                  sla: dict[str, tuple[str, float | None]] | None = None) -> alt.LayerChart:
    """One line per pool over the window, broken where a bucket has no data; df has t, pool, value. `pools`
    are the pools shown (the legend lists those), `everyone` the registry's pools (their colours), `sla`
    maps a pool to its tier and p99 TTFT target for a dashed SLA line."""
    marks = marks or Marks()
    shown = [p for p in everyone if p in set(pools)] + [p for p in pools if p not in everyone]
    data = stamped(with_gaps(df.select("t", "pool", "value"), tl, "pool")).to_pandas()
    line = alt.Chart(data).mark_line().encode(
        x=tl.x(), y=alt.Y("value:Q", title=None, axis=alt.Axis(format=fmt)),
        color=alt.Color("pool:N", scale=pool_scale(shown, everyone), title="pool"),
        tooltip=[alt.Tooltip("when:N", title="time (UTC)"), "pool:N", alt.Tooltip("value:Q", format=fmt)],
    )
    layers = [line, *_sla_layers(sla or {}, tl), *_mark_layers(marks, tl)]
    return alt.LayerChart(layer=layers, title=alt.Title(title, subtitle=marks.subtitle() or " "), height=CHART_HEIGHT)


def lines_by_device(df: pl.DataFrame, title: str, tl: Timeline, fmt: str = "~s", events: bool = False,
                    marks: Marks | None = None) -> alt.LayerChart:
    """A small chart of one metric, a line (for events a point) per device, "node" for node-wide series;
    df has t, device, value."""
    marks = marks or Marks()
    named = df.with_columns(pl.when(pl.col("device") == "").then(pl.lit("node")).otherwise(pl.col("device"))
                            .alias("device")).select("t", "device", "value")
    data = stamped(named if events else with_gaps(named, tl, "device")).to_pandas()
    chart = alt.Chart(data)
    mark = chart.mark_point(filled=True) if events else chart.mark_line(point=named.height < 3)
    body = mark.encode(
        x=tl.x(), y=alt.Y("value:Q", title=None, axis=alt.Axis(format=fmt)),
        color=alt.Color("device:N", title="device"),
        tooltip=[alt.Tooltip("when:N", title="time (UTC)"), "device:N", alt.Tooltip("value:Q", format=",.4~g")],
    )
    return alt.LayerChart(layer=[body, *_mark_layers(marks, tl)], height=DEVICE_CHART_HEIGHT,
                          title=alt.Title(title, subtitle=marks.subtitle() or " "))


def errors_over_time(df: pl.DataFrame, tl: Timeline) -> alt.Chart:
    """One strip per pool and vendor, a mark per time bucket and error class; df has t, label, error_class, ..."""
    data = stamped(df).select("time", "when", "label", "error_class", "severity", "events").to_pandas()
    rows = max(1, df["label"].n_unique())
    return alt.Chart(data, title="Error events by pool and class", height=max(120, 45 * rows)).mark_point(
        filled=True, opacity=0.85).encode(
        x=tl.x(),
        y=alt.Y("label:N", title=None),
        size=alt.Size("events:Q", scale=alt.Scale(range=[60, 400]), legend=None),
        color=alt.Color("error_class:N", title="error class"),
        shape=alt.Shape("severity:N", title="severity",
                        scale=alt.Scale(domain=list(SEVERITY_SHAPES), range=list(SEVERITY_SHAPES.values()))),
        tooltip=[alt.Tooltip("when:N", title="time (UTC)"), "label:N", "error_class:N", "severity:N",
                 "events:Q"],
    ).configure_legend(orient="right")


def routing_mix(df: pl.DataFrame, pools: list[str], tl: Timeline) -> alt.Chart:
    """Share of requests per serving pool over time, stacked to 100 %; df has t, pool, share, requests."""
    data = stamped(df).select("time", "when", "pool", "share", "requests").to_pandas()
    seen = set(df["pool"].to_list())
    domain = [p for p in pools if p in seen] + sorted(seen - set(pools))
    return alt.Chart(data, title="Routing mix (share of requests by serving pool)",
                     height=CHART_HEIGHT).mark_area().encode(
        x=tl.x(),
        y=alt.Y("share:Q", title=None, stack="normalize", axis=alt.Axis(format="%")),
        color=alt.Color("pool:N", scale=pool_scale(domain, pools), title="pool"),
        tooltip=[alt.Tooltip("when:N", title="time (UTC)"), "pool:N",
                 alt.Tooltip("share:Q", format=".1%"), "requests:Q"],
    )
