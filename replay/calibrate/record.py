"""What a calibration returns: a pool's fit record, its benchmark checks, the one list of fitted coefficients,
and the candidate file that carries them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from replay.bands import spread_of
from replay.fitting import Coefficient


@dataclass(frozen=True)
class BenchCheck:
    """One benchmark row beside what the fitted model predicts for it (times in ms)."""

    pool: str
    isl: int
    osl: int
    concurrency: int
    ttft_ms: float
    ttft_ms_model: float
    tpot_ms: float
    tpot_ms_model: float
    ttft_ms_low: float | None = None   # the model's band within the fit's standard errors (replay.bands)
    ttft_ms_high: float | None = None
    tpot_ms_low: float | None = None
    tpot_ms_high: float | None = None
    replayed: str = ""                 # how the row's client was run: its arrivals, lengths and prompts


@dataclass(frozen=True)
class PoolFit:
    """Fitted coefficients of one pool and how well they explain its observations."""

    pool: str
    n_ttft: int
    n_tpot: int
    n_bench: int
    mfu: float | None
    mem_bw_eff: float | None
    step_overhead_ms: float | None
    ttft_mape: float | None
    ttft_r2: float | None
    tpot_mape: float | None
    tpot_r2: float | None
    notes: tuple[str, ...] = ()
    seq_overhead_us: float | None = None
    chunk_overhead_us: float | None = None
    collective_us: float | None = None
    mfu_decode: float | None = None
    serial_share: float | None = None
    coefficients: tuple[Coefficient, ...] = ()
    group: tuple[str, ...] = ()          # the pools fitted together (one chip and engine)
    checks: tuple[BenchCheck, ...] = ()
    carried_from: str | None = None      # the fitted pool whose coefficients a pool without evidence took
    ttft_mdape: float | None = None      # in-sample median absolute error of TTFT, as a share of the observed
    tpot_mdape: float | None = None
    explains: bool | None = None         # in-sample medians within EXPLAINS; None: nothing to explain (carried)
    unphysical: tuple[str, ...] = ()     # fitted coefficients below PHYSICAL_MIN: a sign of a missing term

    def values(self) -> dict[str, float]:
        """The fitted coefficients a candidate takes."""
        return {k: v for k in FITTED if (v := getattr(self, k)) is not None}


FITTED = ("mfu", "mem_bw_eff", "mfu_decode", "step_overhead_ms", "seq_overhead_us", "chunk_overhead_us",
          "collective_us", "serial_share")
# the in-sample median error beyond which a model cannot explain a pool's rows: a fit that misses its own evidence
# by more has found the wrong shape, and its coefficients describe the miss, not the machine
EXPLAINS = {"TTFT": 0.20, "TPOT": 0.10}
# shares of the datasheet's peak no serving engine runs below on silicon that works: a fit that lands there has
# folded a term the model lacks (an engine's time, a collective, a schedule) into an efficiency
PHYSICAL_MIN = {"mfu": 0.05, "mem_bw_eff": 0.3}


def errors(model: np.ndarray, observed: np.ndarray) -> tuple[float | None, float | None, float | None]:
    """MAPE, R^2 and the median absolute percentage error of model against observed values."""
    keep = np.isfinite(model) & np.isfinite(observed) & (observed > 0)
    m, o = model[keep], observed[keep]
    if o.size == 0:
        return None, None, None
    share = np.abs(m - o) / o
    ss_tot = float(np.sum((o - o.mean()) ** 2))
    return (float(np.mean(share)), 1.0 - float(np.sum((o - m) ** 2)) / ss_tot if ss_tot > 0 else None,
            float(np.median(share)))


def calibrated_candidate(fits: tuple[PoolFit, ...], name: str = "calibrated",
                         base: dict[str, Any] | None = None) -> dict[str, Any]:
    """A candidate file body with the fitted coefficients (4 significant places) and their standard errors as
    factors (`spread`, for bands) over a base candidate's body;
    without a base, one that replays the observed routing, to check the fit against what was observed."""
    body: dict[str, Any] = dict(base) if base else {"name": name, "policy": "observed"}
    body["name"] = name
    pools: dict[str, Any] = {k: dict(v) for k, v in body.get("pools", {}).items()}
    for f in fits:
        if values := rounded(f):
            pools[f.pool] = {**pools.get(f.pool, {}), **values}
            if spread := {k: float(f"{v:.4g}") for k, v in spread_of(f.coefficients).items()}:
                pools[f.pool]["spread"] = spread
    body["pools"] = pools
    spreads = {f.pool: float(f"{x:.3g}") for f in fits if (x := step_time_spread(f)) is not None}
    if spreads:
        body["step_time_spread"] = {**body.get("step_time_spread", {}), **spreads}
    return body


THROUGHPUT = ("mfu", "mem_bw_eff", "mfu_decode")  # the coefficients a step's time is inversely proportional to


def step_time_spread(fit: PoolFit) -> float | None:
    """The error on a pool's step time as a factor: the largest spread of its fitted throughput coefficients (a
    step is bound by one of them, and its time scales with its inverse), None when none was fitted with one
    within a factor of 10."""
    spreads = [x for name, x in spread_of(fit.coefficients).items() if name in THROUGHPUT and x <= 10.0]
    return max(spreads) if spreads else None


def rounded(fit: PoolFit) -> dict[str, float]:
    """The fitted coefficients as a candidate writes them (4 significant places): the file and the page alike."""
    return {k: float(f"{v:.4g}") for k, v in fit.values().items()}
