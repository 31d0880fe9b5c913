"""The console's chart rules: the bucket a window calls for, stable pool colours, the reliability axis, and
the time axis, SLA line and marks of the time series, read off the Vega-Lite specs."""

from __future__ import annotations

import polars as pl
import pytest

from app.console import charts, timecharts
from canonical.timeunits import DAY_MS, HOUR_MS, MINUTE_MS

POOLS = ["h100-a", "mi300x-a", "ascend-a"]


@pytest.mark.parametrize(("length", "step"), [
    (10 * MINUTE_MS, MINUTE_MS), (HOUR_MS, MINUTE_MS), (200 * MINUTE_MS, MINUTE_MS),
    (201 * MINUTE_MS, 5 * MINUTE_MS), (6 * HOUR_MS, 5 * MINUTE_MS), (12 * HOUR_MS, 5 * MINUTE_MS),
    (DAY_MS, 15 * MINUTE_MS), (2 * DAY_MS, 15 * MINUTE_MS), (3 * DAY_MS, HOUR_MS), (7 * DAY_MS, HOUR_MS),
    (30 * DAY_MS, 6 * HOUR_MS), (90 * DAY_MS, 12 * HOUR_MS), (120 * DAY_MS, DAY_MS), (400 * DAY_MS, 2 * DAY_MS),
])
def test_the_bucket_follows_the_window(length: int, step: int) -> None:
    assert charts.bucket_ms(length) == step
    assert length // step <= charts.MAX_POINTS


def test_a_pool_keeps_its_colour_and_the_legend_lists_only_the_pools_shown() -> None:
    everyone = charts.pool_scale(POOLS).to_dict()
    one = charts.pool_scale(["ascend-a"], POOLS).to_dict()
    assert one == {"domain": ["ascend-a"], "range": [everyone["range"][2]]}


@pytest.mark.parametrize(("values", "floor"), [([0.958, 1.0], 0.9), ([1.0], 0.95), ([0.8125], 0.75),
                                               ([0.03, 1.0], 0.0)])
def test_the_reliability_axis_keeps_95_8_and_100_percent_apart(values: list[float], floor: float) -> None:
    assert charts.reliability_floor(values) == pytest.approx(floor)


def test_reliability_bars_are_worst_first() -> None:
    df = pl.DataFrame({"pool": POOLS, "index": [1.0, 0.958, 0.99], "healthy": [1, 2, 3], "observed": [1, 2, 3]})
    spec = charts.reliability_bars(df, POOLS).to_dict()
    assert spec["layer"][0]["encoding"]["y"]["sort"] == ["mi300x-a", "ascend-a", "h100-a"]
    assert spec["layer"][0]["encoding"]["x"]["scale"]["domain"] == [0.9, 1]


T0 = 1_795_852_800_000  # 2026-11-28T08:00:00Z
TL = timecharts.Timeline(T0, T0 + DAY_MS, 15 * MINUTE_MS)


def test_a_missing_bucket_is_a_gap_not_a_bridge() -> None:
    df = pl.DataFrame({"t": [T0, T0 + 2 * TL.step_ms], "pool": ["h100-a", "h100-a"], "value": [1.0, 3.0]})
    filled = timecharts.with_gaps(df, TL, "pool")
    assert filled.height == 96 and filled["value"].null_count() == 94
    assert filled["value"].to_list()[:3] == [1.0, None, 3.0]


def test_time_series_are_drawn_in_utc_with_the_sla_line_and_the_marks() -> None:
    df = pl.DataFrame({"t": [T0, T0 + TL.step_ms], "pool": ["h100-a"] * 2, "value": [0.4, 2.5]})
    marks = timecharts.Marks(
        pl.DataFrame({"t": [T0], "pool": ["h100-a"], "node": ["n2"], "severity": ["fatal"], "events": [4.0],
                      "codes": ["79"]}, schema=timecharts.EVENT_SCHEMA),
        pl.DataFrame({"ts": [T0 + HOUR_MS], "pool": ["h100-a"], "node": ["n1"], "device": [""],
                      "component": ["driver"], "previous": ["550.144.03"], "version": ["550.163.01"]},
                     schema=timecharts.CHANGE_SCHEMA))
    spec = timecharts.lines_by_pool(df, "p99 TTFT (s)", ".2f", ["h100-a"], POOLS, TL, marks,
                                    {"h100-a": ("standard", 2.0)}).to_dict()
    x = spec["layer"][0]["encoding"]["x"]
    assert x["scale"]["type"] == "utc" and x["title"] == "time (UTC)" and x["axis"]["format"] == "%H:%M"
    assert x["scale"]["domain"][0] == {"year": 2026, "month": 11, "date": 28, "hours": 8, "minutes": 0,
                                       "seconds": 0, "milliseconds": 0, "utc": True}
    assert spec["layer"][0]["encoding"]["color"]["scale"]["domain"] == ["h100-a"]
    rules = [layer for layer in spec["layer"] if layer["mark"]["type"] == "rule"]
    assert [r["mark"].get("strokeDash") for r in rules] == [[6, 4], None, [4, 3]]  # SLA, event, version change
    assert timecharts.sla_labels({"h100-a": ("standard", 2.0)}) == [(2.0, "SLA standard: p99 2 s")]
    assert timecharts.sla_labels({"a": ("standard", 2.0), "b": ("premium", 0.5), "c": ("batch", None)}) == [
        (0.5, "SLA premium: p99 0.5 s (b)"), (2.0, "SLA standard: p99 2 s (a)")]
    assert marks.subtitle() == "▼ fatal errors   ◆ version changes"
    assert timecharts.Marks().subtitle() == ""


def test_a_window_over_a_day_labels_the_day() -> None:
    assert timecharts.Timeline(T0, T0 + 7 * DAY_MS, HOUR_MS).time_format() == "%m-%d %H:%M"
