"""Recent traffic at the load of a future date: each request thinned or replicated by its pool's growth factor.

Request i's copy j (j = 0 is the request itself) is replayed when the factor exceeds j + u_ij, with u_ij drawn
once per run (seeded). The number of copies then has the factor as its mean, and a larger factor only adds
copies, so the loads of two dates differ by the requests between them and not by a new draw: the violation rate
climbs with the date without noise of its own. A copy keeps the request's lengths, prefix, tier and model, and
arrives within half an hour of it (wrapped inside the replayed window): independently displaced arrivals of a
Poisson stream stay Poisson, and the hour of day (so the daily cycle) is kept.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

JITTER_MS = 30 * 60_000
ORIGIN = "origin"      # the pool a request was observed on ("" when the trace names none)


@dataclass(frozen=True)
class Scaler:
    """The replayed window and the draws that scale it."""

    frame: pl.DataFrame    # the window's requests in arrival order, with an `origin` column
    start_ms: int
    end_ms: int
    u: np.ndarray          # (copies, requests) uniform draws
    shift_ms: np.ndarray   # (copies, requests) displacement of each copy

    @property
    def origins(self) -> np.ndarray:
        """Each request's origin pool."""
        return self.frame[ORIGIN].to_numpy()


def scaler(frame: pl.DataFrame, start_ms: int, end_ms: int, max_factor: float, seed: int) -> Scaler:
    """Draws for factors up to max_factor over the requests of [start_ms, end_ms)."""
    copies = max(1, int(np.ceil(max_factor)))
    rng = np.random.default_rng(seed)
    n = frame.height
    shift = rng.integers(-JITTER_MS, JITTER_MS + 1, size=(copies, n))
    shift[0] = 0
    return Scaler(frame=frame, start_ms=start_ms, end_ms=end_ms, u=rng.random((copies, n)), shift_ms=shift)


def scaled(s: Scaler, factors: np.ndarray) -> pl.DataFrame:
    """The window with request i replayed about factors[i] times, in arrival order with fresh sequence numbers."""
    if float(factors.max(initial=0.0)) > s.u.shape[0]:
        raise ValueError(f"factor {float(factors.max()):.3g} above the {s.u.shape[0]} copies drawn")
    span = s.end_ms - s.start_ms
    parts = []
    arrival = s.frame["arrival_ms"].to_numpy()
    for j in range(s.u.shape[0]):
        take = factors > j + s.u[j]
        if not take.any():
            break
        idx = np.flatnonzero(take)
        at = arrival[idx] + s.shift_ms[j, idx]
        if j:
            at = s.start_ms + (at - s.start_ms) % span
        parts.append(s.frame[idx].with_columns(pl.Series("arrival_ms", at, dtype=pl.Int64)))
    if not parts:
        return s.frame.clear()
    out = pl.concat(parts).sort("arrival_ms", maintain_order=True)
    return out.with_columns(pl.int_range(pl.len(), dtype=pl.Int64).alias("seq"))
