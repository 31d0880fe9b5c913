"""The growth fit: a known weekly growth recovered through weekly seasonality and noise, none on a flat history."""

from __future__ import annotations

import math

import numpy as np
import pytest

from canonical.timeunits import DAY_MS
from replay.exceptions import RunwayError
from replay.runway.growth import fit_growth, parse_growth

END_MS = 1_800_000_000_000 - 1_800_000_000_000 % DAY_MS  # a midnight
SEASON = np.array([1.0, 1.05, 1.1, 1.08, 1.0, 0.55, 0.45])   # weekdays busy, the weekend quiet


def history(rng: np.random.Generator, weekly: float, days: int = 56, per_day: float = 3000.0,
            noise: float = 0.08) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Poisson days at a rate growing by `weekly` a week, times a weekly season and lognormal day-to-day noise."""
    arrivals = []
    for d in range(days):
        start = END_MS - (days - d) * DAY_MS
        weeks_back = (days - d) / 7.0
        rate = per_day * (1 + weekly) ** -weeks_back * SEASON[d % 7] * math.exp(rng.normal(0, noise))
        n = rng.poisson(rate)
        arrivals.append(np.sort(rng.integers(start, start + DAY_MS, n)))
    a = np.concatenate(arrivals)
    return a, rng.integers(100, 2000, a.size), rng.integers(10, 500, a.size)


def fit(a: np.ndarray, i: np.ndarray, o: np.ndarray, window: int = 56):  # type: ignore[no-untyped-def]
    return fit_growth(a, i, o, end_ms=END_MS, window_days=window, history_start_ms=int(a.min()) // DAY_MS * DAY_MS)


def test_a_known_growth_is_recovered_within_its_interval() -> None:
    growth = fit(*history(np.random.default_rng(7), 0.04))
    assert growth.low < 0.04 < growth.high
    assert growth.per_week == pytest.approx(0.04, abs=0.015)
    assert growth.detected and growth.days == 56 and growth.weeks == 8
    # 8 % day-to-day noise over 8 weeks: the interval is about +-1 point, not +-10
    assert growth.high - growth.low < 0.03
    # tokens per request were drawn without a trend: theirs is near zero
    assert abs(growth.prompt_per_week or 1) < 0.02 and abs(growth.output_per_week or 1) < 0.02


def test_the_interval_covers_the_true_growth_about_as_often_as_it_says() -> None:
    covered = sum(g.low < 0.03 < g.high for g in (fit(*history(np.random.default_rng(s), 0.03, days=28))
                                                   for s in range(40)))
    assert covered >= 34  # 95 % nominal over 40 histories: 38 expected, 34 is 2.2 sigma below


def test_the_seasonality_does_not_pass_for_growth() -> None:
    # four weeks whose last days are a weekend: a fit without day-of-week levels would see a decline
    growth = fit(*history(np.random.default_rng(3), 0.0, days=28, noise=0.02))
    assert not growth.detected
    assert growth.low < 0 < growth.high


def test_a_flat_history_shows_no_growth() -> None:
    flat = [fit(*history(np.random.default_rng(100 + s), 0.0)) for s in range(10)]
    assert sum(g.detected for g in flat) <= 1


def test_a_shrinking_history_is_no_growth() -> None:
    growth = fit(*history(np.random.default_rng(5), -0.05))
    assert growth.per_week < 0 and not growth.detected


def test_the_fit_supports_a_horizon_that_shrinks_with_its_noise() -> None:
    quiet = fit(*history(np.random.default_rng(1), 0.04, noise=0.02))
    noisy = fit(*history(np.random.default_rng(1), 0.04, noise=0.3))
    assert quiet.supported_weeks > 4 * noisy.supported_weeks
    # by definition: the load band at the supported horizon spans a factor 2
    q_se = (math.log1p(noisy.high) - math.log1p(noisy.low)) / 2
    assert math.exp(q_se * noisy.supported_weeks) == pytest.approx(2.0)


@pytest.mark.parametrize(("days", "window", "message"), [
    (10, 28, "10 whole days of stored traffic before"),
    (56, 13, "13 whole days"),
])
def test_too_little_history_asks_for_a_growth(days: int, window: int, message: str) -> None:
    a, i, o = history(np.random.default_rng(0), 0.02, days=days)
    with pytest.raises(RunwayError, match=message) as info:
        fit(a, i, o, window=window)
    assert "pass --growth R%/week" in str(info.value)


def test_a_day_without_requests_is_a_gap() -> None:
    a, i, o = history(np.random.default_rng(0), 0.02, days=28)
    hole = (a >= END_MS - 10 * DAY_MS) & (a < END_MS - 9 * DAY_MS)
    with pytest.raises(RunwayError, match=r"no requests stored on the day from 2027-01-05 .* gap"):
        fit(a[~hole], i[~hole], o[~hole], window=28)


@pytest.mark.parametrize(("text", "rate"), [("auto", None), ("5%/week", 0.05), ("2.5%", 0.025),
                                            (" -1 % / w", -0.01)])
def test_growth_option(text: str, rate: float | None) -> None:
    assert parse_growth(text) == (pytest.approx(rate) if rate is not None else None)


@pytest.mark.parametrize("text", ["5", "fast", "5%/day", "-100%"])
def test_bad_growth_option(text: str) -> None:
    with pytest.raises(RunwayError, match="--growth"):
        parse_growth(text)
