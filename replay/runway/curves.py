"""What the console draws of a runway, as plain frames: a pool's daily requests with its growth's trend and band
carried to the horizon, and the violation rate its replays found against load."""

from __future__ import annotations

import datetime as dt

import numpy as np
import polars as pl

from canonical.timeunits import DAY_MS
from replay.runway.breaking import PoolRunway, Runway
from replay.runway.growth import day_of


def load_curve(runway: Runway, pool: PoolRunway) -> pl.DataFrame:
    """Per day (date): the requests observed (null ahead of today), and the trend at the growth with its low and
    high ends, from the level of the last fitted week (whose days of the week average out), or with a given
    growth from the replayed window's requests a day, to the horizon."""
    g = pool.growth
    days = [day_of(ms) for ms in g.day_starts_ms]
    if days:
        level = float(np.mean(g.day_counts[-7:]))
        mid = days[-1] - dt.timedelta(days=3)     # the middle of the last fitted week
    else:                                         # a given growth: from the replayed window's rate
        level, mid = pool.per_day, runway.today
    ahead = [runway.today + dt.timedelta(days=k) for k in range(1, round(runway.horizon_weeks * 7) + 1)]
    every = days + ahead
    weeks = np.array([(d - mid).days / 7.0 for d in every])
    observed = list(g.day_counts) + [None] * len(ahead)
    return pl.DataFrame({"date": every, "observed": pl.Series(observed, dtype=pl.Int64),
                         "trend": level * (1 + g.per_week) ** weeks,
                         "low": level * (1 + np.where(weeks > 0, g.low, g.high)) ** weeks,
                         "high": level * (1 + np.where(weeks > 0, g.high, g.low)) ** weeks})


def violation_curve(runway: Runway, pool: PoolRunway) -> pl.DataFrame:
    """Each replayed date's load (a multiple of the replayed week's) and the share of the pool's requests that
    missed their SLA there."""
    rows = [{"date": runway.today + dt.timedelta(days=d), "load": f, "violation_rate": r} for d, f, r in pool.curve]
    return pl.DataFrame(rows, schema={"date": pl.Date, "load": pl.Float64, "violation_rate": pl.Float64})


def age_text(computed_ms: int, now_ms: int) -> str:
    """How old a computation is, in the largest whole unit: 'computed 3 h ago', 'computed 2 days ago'."""
    minutes = max(0, (now_ms - computed_ms) // 60_000)
    if minutes < 60:
        return f"computed {minutes} min ago"
    if minutes < DAY_MS // 60_000:
        return f"computed {minutes // 60} h ago"
    days = minutes // (DAY_MS // 60_000)
    return f"computed {days} day{'s' if days > 1 else ''} ago"
