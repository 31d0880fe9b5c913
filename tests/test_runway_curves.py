"""What the console draws of a runway: the load curve's trend and band, the violations against load, the age."""

from __future__ import annotations

import datetime as dt

import pytest

from canonical.timeunits import DAY_MS
from replay.runway.breaking import PoolRunway, Runway
from replay.runway.curves import age_text, load_curve, violation_curve
from replay.runway.growth import Growth, given_growth

TODAY = dt.date(2027, 1, 14)
START = 1_800_000_000_000 - 1_800_000_000_000 % DAY_MS - 14 * DAY_MS   # 2027-01-01


def runway(growth: Growth, per_day: float = 0.0) -> tuple[Runway, PoolRunway]:
    p = PoolRunway(pool="p", growth=growth, breaks_on=None, breaks_on_low=None, breaks_on_high=None,
                   violation_rate_now=0.0, replicas_to_add=None, added_cost_per_month_usd=None,
                   curve=((0, 1.05, 0.002), (14, 1.16, 0.02)), per_day=per_day)
    return Runway(today=TODAY, horizon_weeks=2, tolerance=0.01, replayed="", pools=(p,)), p


def test_the_trend_runs_from_the_last_weeks_level_with_its_band_widening_ahead() -> None:
    counts = tuple([100] * 7 + [110] * 7)
    g = Growth(per_week=0.10, low=0.05, high=0.15, method="fitted", days=14,
               day_starts_ms=tuple(START + k * DAY_MS for k in range(14)), day_counts=counts)
    r, p = runway(g)
    curve = load_curve(r, p)
    assert curve.height == 14 + 14 and curve["observed"].null_count() == 14
    # the last fitted week's mean (110) at its middle day, 2027-01-11; a week later 10 % more, band 5 % .. 15 %
    row = curve.filter(curve["date"] == dt.date(2027, 1, 18)).row(0, named=True)
    assert row["trend"] == pytest.approx(121.0) and row["low"] == pytest.approx(115.5)
    assert row["high"] == pytest.approx(126.5)
    back = curve.filter(curve["date"] == dt.date(2027, 1, 4)).row(0, named=True)
    assert back["low"] <= back["trend"] <= back["high"]  # behind the middle too, the band holds the trend


def test_a_given_growth_starts_from_the_replayed_windows_rate() -> None:
    r, p = runway(given_growth(0.10), per_day=700.0)
    curve = load_curve(r, p)
    assert curve["observed"].null_count() == curve.height == 14
    assert curve["trend"][6] == pytest.approx(700.0 * 1.1)   # a week after today
    assert (curve["low"] == curve["trend"]).all()              # a given rate has no interval


def test_violations_against_load_and_ages() -> None:
    r, p = runway(given_growth(0.10))
    v = violation_curve(r, p)
    assert v["date"].to_list() == [TODAY, TODAY + dt.timedelta(days=14)] and v["load"].to_list() == [1.05, 1.16]
    assert [age_text(0, ms) for ms in (59_000, 3_600_000 * 5, DAY_MS, 3 * DAY_MS)] == [
        "computed 0 min ago", "computed 5 h ago", "computed 1 day ago", "computed 3 days ago"]
