"""The breaking date against queueing theory: an M/M/c pool whose traffic grows at a known rate breaks its SLA
tolerance when Erlang-C says P(wait > TTFT target) passes it."""

from __future__ import annotations

import datetime as dt
import math

import numpy as np
import polars as pl
import pytest
from scipy.optimize import brentq

from canonical.timeunits import DAY_MS, HOUR_MS, WEEK_MS
from replay import Candidate, SlaTier
from replay.candidate import PredictorSpec
from replay.exceptions import RunwayError
from replay.runway.breaking import MONTH_S, compute_runway
from replay.runway.growth import NO_GROWTH, fit_growth, given_growth
from replay.runway.scale import ORIGIN, scaled, scaler
from tests.replay_fleets import chip, flat_model, fleet, pool

C = 4                 # replicas of one sequence each: M/M/4
SERVICE_S = 30.0      # mean service: out ~ Exp(300,000 tokens) at 1e-4 s a token (1e9 B per pass at 1e13 B/s)
TTFT_S = 30.0
GROWTH = 0.10         # a week
WEEKS_TO_BREAK = 6    # the history ends this many weeks of growth before Erlang-C's breaking load
END_MS = 1_790_000_000_000 - 1_790_000_000_000 % DAY_MS  # 2026-09-21: stored arrivals may not be ahead of now
MM4 = fleet(pool("p", replicas=C, eff=1.0, cost=2.0), chips=(chip(bw_tbps=10.0),),
            models=(flat_model(params_b=1.0, bpp=1.0, max_context=10**9),))
KNOWING = Candidate(name="t", policy="cost_min", predictor=PredictorSpec("oracle"),
                    sla_tiers={"standard": SlaTier(ttft_s=TTFT_S)})


def erlang_c(c: int, a: float) -> float:
    """Probability that an arrival waits in M/M/c with offered load a = lambda / mu."""
    head = sum(a**k / math.factorial(k) for k in range(c))
    tail = a**c / math.factorial(c) * c / (c - a)
    return tail / (head + tail)


def late(lam: float) -> float:
    """P(wait > TTFT target) in M/M/c: C(c, a) e^(-(c mu - lambda) t)."""
    return erlang_c(C, lam * SERVICE_S) * math.exp(-(C / SERVICE_S - lam) * TTFT_S)


LAM_BREAK = brentq(lambda lam: late(lam) - 0.01, 1e-6, C / SERVICE_S * (1 - 1e-9))
LAM_END = LAM_BREAK / (1 + GROWTH) ** WEEKS_TO_BREAK


def history(seed: int, days: int = 28) -> pl.DataFrame:
    """Poisson arrivals hour by hour at LAM_END x 1.1^(weeks before the end), exponential services."""
    rng = np.random.default_rng(seed)
    parts = []
    for h in range(days * 24):
        start = END_MS - (days * 24 - h) * HOUR_MS
        lam = LAM_END * (1 + GROWTH) ** ((start + HOUR_MS / 2 - END_MS) / WEEK_MS)
        parts.append(np.sort(rng.integers(start, start + HOUR_MS, rng.poisson(lam * 3600))))
    arrival = np.concatenate(parts)
    out = np.maximum(1, np.round(rng.exponential(SERVICE_S / 1e-4, arrival.size))).astype(np.int64)
    return pl.DataFrame({"arrival_ms": arrival, "in_tokens": 1, "cached_tokens": 1, "out_tokens": out,
                         "seq": np.arange(arrival.size), ORIGIN: "p"})


def test_the_breaking_date_is_erlang_cs_within_a_week_and_inside_its_band() -> None:
    frame = history(11)
    growth = fit_growth(frame["arrival_ms"].to_numpy(), frame["in_tokens"].to_numpy(),
                        frame["out_tokens"].to_numpy(), end_ms=END_MS, window_days=28,
                        history_start_ms=END_MS - 28 * DAY_MS, who="pool 'p'")
    assert growth.low < GROWTH < growth.high
    start = END_MS - WEEK_MS
    week = frame.filter(pl.col("arrival_ms") >= start)
    runway = compute_runway(KNOWING, week, MM4, {"p": growth}, start_ms=start, end_ms=END_MS, pools=["p"],
                            tolerance=0.01, horizon_weeks=12, seed=3)
    (p,) = runway.pools
    erlang_date = runway.today + dt.timedelta(days=7 * WEEKS_TO_BREAK)
    assert p.breaks_on is not None and p.breaks_on_low is not None and p.breaks_on_high is not None
    assert abs((p.breaks_on - erlang_date).days) <= 7, (p.breaks_on, erlang_date)
    assert p.breaks_on_low <= erlang_date <= p.breaks_on_high, (p.breaks_on_low, erlang_date, p.breaks_on_high)
    # today the pool runs at a sixth of its breaking load's violations: well inside the tolerance
    assert p.violation_rate_now < 0.01 / 2
    assert runway.breaking == (p,) and p.status == "breaks"
    # the horizon's load is 1.1^12 / 1.1^6 = 1.77 times the breaking one: Erlang-C says how many servers hold it
    lam_h = LAM_END * (1 + GROWTH) ** 12
    need = next(c for c in range(C, 40) if c > lam_h * SERVICE_S and erlang_c(c, lam_h * SERVICE_S)
                * math.exp(-(c / SERVICE_S - lam_h) * TTFT_S) <= 0.01)
    assert p.replicas_to_add is not None and abs(C + p.replicas_to_add - need) <= 1
    assert p.added_cost_per_month_usd == pytest.approx(p.replicas_to_add * 2.0 * MONTH_S / 3600)
    record = runway.data()["pools"][0]  # type: ignore[index]
    assert list(record) == ["pool", "growth_per_week", "growth_low", "growth_high", "breaks_on", "breaks_on_low",
                            "breaks_on_high", "violation_rate_now", "replicas_to_add", "added_cost_per_month_usd",
                            "notes"]
    assert record["breaks_on"] == p.breaks_on.isoformat()


def test_a_pool_without_growth_holds_and_says_why() -> None:
    frame = history(2, days=7)
    start = END_MS - WEEK_MS
    runway = compute_runway(KNOWING, frame, MM4, {"p": given_growth(-0.02)}, start_ms=start, end_ms=END_MS,
                            pools=["p"], tolerance=0.01, horizon_weeks=4)
    (p,) = runway.pools
    assert p.breaks_on is None and p.breaks_on_low is None and p.replicas_to_add is None
    assert NO_GROWTH in p.notes and runway.breaking == () and p.status == "no_growth"


def test_a_pool_over_the_tolerance_today_breaks_today() -> None:
    frame = history(2, days=7)
    tight = Candidate(name="t", policy="cost_min", predictor=PredictorSpec("oracle"),
                      sla_tiers={"standard": SlaTier(ttft_s=0.001)})  # every request waits longer than a pass
    runway = compute_runway(tight, frame, MM4, {"p": given_growth(0.05)}, start_ms=END_MS - WEEK_MS,
                            end_ms=END_MS, pools=["p"], tolerance=0.01, horizon_weeks=2)
    (p,) = runway.pools
    assert p.breaks_on == runway.today == p.breaks_on_low
    assert any("already over the tolerance" in n for n in p.notes)


def test_an_unknown_pool_is_named() -> None:
    with pytest.raises(RunwayError, match="unknown pool 'q'; replayable: p"):
        compute_runway(KNOWING, history(2, days=7), MM4, {"p": given_growth(0.05)}, start_ms=END_MS - WEEK_MS,
                       end_ms=END_MS, pools=["q"], tolerance=0.01, horizon_weeks=2)


def test_scaling_thins_and_replicates_with_the_factor_as_mean_and_only_adds_with_it() -> None:
    frame = history(4, days=7)
    s = scaler(frame, END_MS - WEEK_MS, END_MS, 3.0, seed=1)
    n = frame.height
    for f in (0.5, 1.0, 1.7, 2.9):
        out = scaled(s, np.full(n, f))
        assert out.height == pytest.approx(f * n, rel=0.02)
        assert out["arrival_ms"].is_sorted() and out["seq"].to_list() == list(range(out.height))
        assert out["arrival_ms"].min() >= END_MS - WEEK_MS and out["arrival_ms"].max() < END_MS  # type: ignore[operator]
    # a larger factor keeps every request of a smaller one: the same requests (by their lengths) and more
    small, big = scaled(s, np.full(n, 1.3)), scaled(s, np.full(n, 1.6))
    assert set(small["out_tokens"].to_list()) <= set(big["out_tokens"].to_list())
    with pytest.raises(ValueError, match="above the 3 copies"):
        scaled(s, np.full(n, 3.5))


def test_the_calibrations_step_time_error_widens_the_band() -> None:
    frame = history(5, days=7)
    start = END_MS - WEEK_MS
    bare = compute_runway(KNOWING, frame, MM4, {"p": given_growth(0.10)}, start_ms=start, end_ms=END_MS,
                          pools=["p"], tolerance=0.01, horizon_weeks=10)
    wide = compute_runway(KNOWING, frame, MM4, {"p": given_growth(0.10)}, start_ms=start, end_ms=END_MS,
                          pools=["p"], tolerance=0.01, horizon_weeks=10, spreads={"p": 1.2})
    (b,), (w,) = bare.pools, wide.pools
    assert b.breaks_on == w.breaks_on is not None  # the date is the replay's; only its band moves
    assert w.breaks_on_low is not None and b.breaks_on_low is not None
    assert w.breaks_on_high is not None and b.breaks_on_high is not None
    # a 20 % slower or faster step moves the load the pool holds by 1.2: ln 1.2 / ln 1.1 = 1.9 weeks either way
    assert (b.breaks_on_low - w.breaks_on_low).days >= 7 and (w.breaks_on_high - b.breaks_on_high).days >= 7
    assert any("the calibration's ±20% on the step time" in n for n in w.notes)


@pytest.mark.slow  # an overloaded queue replayed at 8 times a week's load
def test_the_search_stops_where_the_window_would_be_scaled_past_eight_times() -> None:
    frame = history(6, days=7)
    # 30 %/week for 26 weeks is 920 times the load; the M/M/4 pool breaks long before 8 times
    runway = compute_runway(KNOWING, frame, MM4, {"p": given_growth(0.30)}, start_ms=END_MS - WEEK_MS,
                            end_ms=END_MS, pools=["p"], tolerance=0.01, horizon_weeks=26)
    (p,) = runway.pools
    assert p.breaks_on is not None and max(f for _, f, _ in p.curve) <= 8.0
    assert any("(8 times the window's load; not the horizon)" in n for n in p.notes)
    # a pool that holds 8 times its load is said to hold only that far
    loose = Candidate(name="t", policy="cost_min", predictor=PredictorSpec("oracle"),
                      sla_tiers={"standard": SlaTier(ttft_s=10**6)})
    held = compute_runway(loose, frame, MM4, {"p": given_growth(0.30)}, start_ms=END_MS - WEEK_MS,
                          end_ms=END_MS, pools=["p"], tolerance=0.01, horizon_weeks=26).pools[0]
    assert held.breaks_on is None and any("where the load reaches 8 times" in n for n in held.notes)
    assert held.status == "holds_to_cap"
