"""The times a record may carry: no more than a day ahead of now, no more than HETPOOL_MAX_SAMPLE_AGE_DAYS (default
3650) days before it. Samples and trace arrivals are held to the same bounds, written here once: outside them a
timestamp is truncated or mis-scaled (year 1, year 9999), not history, and it would cost a rollup or a replay
decades of empty time.
"""

from __future__ import annotations

from collections.abc import Mapping

import polars as pl

from canonical.timeunits import DAY_MS

MAX_AHEAD_MS = DAY_MS
DEFAULT_MAX_AGE_DAYS = 3650
MAX_AGE_ENV = "HETPOOL_MAX_SAMPLE_AGE_DAYS"


def max_age_ms(env: Mapping[str, str]) -> int:
    """The oldest accepted time, as milliseconds before now, from $HETPOOL_MAX_SAMPLE_AGE_DAYS in `env`;
    ValueError quoting a setting that is not a number of days between 0 and 100000."""
    raw = env.get(MAX_AGE_ENV, "").strip()
    if not raw:
        return DEFAULT_MAX_AGE_DAYS * DAY_MS
    try:
        days = float(raw)
    except ValueError:
        days = -1.0
    if not 0 < days < 1e5:
        raise ValueError(f"{MAX_AGE_ENV}={raw!r} is not a number of days between 0 and 100000")
    return int(days * DAY_MS)


def ahead_reason(what: str, iso: pl.Expr) -> pl.Expr:
    """The reason of a time more than MAX_AHEAD_MS ahead of now (`iso`: the time as text)."""
    return pl.format(f"{what} {{}} is more than a day ahead of now", iso)


def too_old_reason(what: str, iso: pl.Expr, age_ms: int) -> pl.Expr:
    """The reason of a time more than `age_ms` before now."""
    return pl.format(f"{what} {{}} is more than {age_ms / DAY_MS:g} days before now (raise {MAX_AGE_ENV} to keep "
                     f"older ones)", iso)


def out_of_bounds(ts: pl.Expr, what: str, now_ms: int, age_ms: int) -> pl.Expr:
    """The reason an epoch-ms time `ts` is outside the bounds, null when inside (or null itself)."""
    iso = pl.from_epoch(ts, time_unit="ms").dt.to_string("%Y-%m-%dT%H:%M:%SZ")
    return (pl.when(ts > now_ms + MAX_AHEAD_MS).then(ahead_reason(what, iso))
            .when(ts < now_ms - age_ms).then(too_old_reason(what, iso, age_ms))
            .otherwise(pl.lit(None, pl.String)))
