"""The runway from stored requests: each pool's growth fitted on the requests observed on it, then the recent
week replayed at future loads (replay.runway.breaking). Pure: the faces read the requests and save the result.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from canonical.timeunits import DAY_MS, WEEK_MS
from pool_registry import Registry
from replay.candidate import Candidate
from replay.exceptions import RunwayError
from replay.fleet import pools_by_id
from replay.runway.breaking import FLEET, Progress, Runway, compute_runway
from replay.runway.growth import Growth, day_of, fit_growth, given_growth
from replay.runway.scale import ORIGIN

MAX_HORIZON_WEEKS = 104


@dataclass(frozen=True)
class RunwayAsk:
    """What a face asks: the window the growth is fitted over, a given growth (None: fit it), the horizon,
    the SLA tolerance, the pools to report (empty: every pool with stored traffic) and the seed."""

    window_days: int = 28
    growth: float | None = None
    horizon_weeks: float = 26.0
    tolerance: float = 0.01
    pools: tuple[str, ...] = ()
    seed: int = 0


def runway_of(candidate: Candidate, requests: pl.DataFrame, registry: Registry, ask: RunwayAsk, *,
              history_start_ms: int, history: pl.DataFrame | None = None, telemetry: pl.DataFrame | None = None,
              spreads: dict[str, float] | None = None, progress: Progress | None = None) -> tuple[Runway, list[str]]:
    """The runway of the asked pools from stored requests (the window's, with obs_pool), and notes on what was
    left out. Raise RunwayError for traffic that cannot support one."""
    if not 0 < ask.horizon_weeks <= MAX_HORIZON_WEEKS:
        raise RunwayError(f"--horizon {ask.horizon_weeks:g} weeks: expected more than 0 and at most "
                          f"{MAX_HORIZON_WEEKS} weeks")
    if requests.height == 0:
        raise RunwayError("no stored requests in the window: ingest traffic first (hetpool ingest traffic)")
    specs = pools_by_id(registry, candidate)
    for p in ask.pools:
        if p not in specs:
            raise RunwayError(f"unknown pool {p!r}; replayable: {', '.join(specs)}")
    end_ms = int(requests["arrival_ms"].max()) + 1  # type: ignore[arg-type]
    observed = requests["obs_pool"] if "obs_pool" in requests.columns else pl.Series([None] * requests.height)
    origin = observed.fill_null(FLEET).replace_strict({p: p for p in specs}, default=FLEET, return_dtype=pl.String)
    frame = requests.with_columns(origin.alias(ORIGIN))
    seen = set(frame[ORIGIN].unique().to_list())
    notes: list[str] = []
    if seen == {FLEET}:
        wanted = list(ask.pools) or list(specs)
    else:
        idle = [p for p in (ask.pools or specs) if p not in seen]
        if ask.pools and idle:
            raise RunwayError(f"pool {idle[0]!r} has no stored traffic in the window: it served no request of it, "
                              "so it has no growth to fit")
        notes += [f"pool {p!r}: no stored traffic in the window, left out" for p in idle]
        wanted = [p for p in (ask.pools or specs) if p in seen]
    growths: dict[str, Growth] = {}
    for o in sorted(seen):
        if ask.growth is not None:
            growths[o] = given_growth(ask.growth)
            continue
        mine = frame.filter(pl.col(ORIGIN) == o)
        who = "the fleet's requests observed on no pool" if o == FLEET else f"pool {o!r}"
        growths[o] = fit_growth(mine["arrival_ms"].to_numpy(), mine["in_tokens"].to_numpy(),
                                mine["out_tokens"].to_numpy(), end_ms=end_ms, window_days=ask.window_days,
                                history_start_ms=history_start_ms, who=who)
    for p in wanted:
        g = growths.get(p, growths.get(FLEET))
        if g is not None and g.detected and ask.horizon_weeks > g.supported_weeks:
            raise RunwayError(
                f"pool {p!r}: the growth fit over {g.days} days ({g.low:+.1%} .. {g.high:+.1%}/week) supports a "
                f"horizon of {g.supported_weeks:.0f} weeks at most (past it the load could be half or double); "
                f"shorten --horizon or widen --window")
    start_ms = max(end_ms - WEEK_MS, history_start_ms)
    if end_ms - start_ms < WEEK_MS:
        notes.append(f"replaying the {(end_ms - start_ms) / DAY_MS:.1f} days stored, less than a week: the days of "
                     "the week it misses are not replayed")
    window = frame.filter(pl.col("arrival_ms") >= start_ms).drop("trace", strict=False)
    window = window.with_columns(pl.Series("seq", np.arange(window.height), dtype=pl.Int64))
    runway = compute_runway(candidate, window, registry, growths, start_ms=start_ms, end_ms=end_ms, pools=wanted,
                            tolerance=ask.tolerance, horizon_weeks=ask.horizon_weeks, seed=ask.seed,
                            history=history, telemetry=telemetry, spreads=spreads, progress=progress)
    return runway, notes


def today_of(requests: pl.DataFrame) -> str:
    """The UTC date of the newest request, as ISO text."""
    return day_of(int(requests["arrival_ms"].max())).isoformat()  # type: ignore[arg-type]
