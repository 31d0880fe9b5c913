"""What a calibration returns: a pool's fit record, its benchmark checks, the one list of fitted coefficients,
and the candidate file that carries them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

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
    collective_us: float | None = None
    mfu_decode: float | None = None
    serial_share: float | None = None
    coefficients: tuple[Coefficient, ...] = ()
    group: tuple[str, ...] = ()          # the pools fitted together (one chip and engine)
    checks: tuple[BenchCheck, ...] = ()
    carried_from: str | None = None      # the fitted pool whose coefficients a pool without evidence took

    def values(self) -> dict[str, float]:
        """The fitted coefficients a candidate takes."""
        return {k: v for k in FITTED if (v := getattr(self, k)) is not None}


FITTED = ("mfu", "mem_bw_eff", "mfu_decode", "step_overhead_ms", "seq_overhead_us", "collective_us", "serial_share")


def errors(model: np.ndarray, observed: np.ndarray) -> tuple[float | None, float | None]:
    """MAPE and R^2 of model against observed values."""
    keep = np.isfinite(model) & np.isfinite(observed) & (observed > 0)
    m, o = model[keep], observed[keep]
    if o.size == 0:
        return None, None
    mape = float(np.mean(np.abs(m - o) / o))
    ss_tot = float(np.sum((o - o.mean()) ** 2))
    return mape, (1.0 - float(np.sum((o - m) ** 2)) / ss_tot if ss_tot > 0 else None)


def calibrated_candidate(fits: tuple[PoolFit, ...], name: str = "calibrated",
                         base: dict[str, Any] | None = None) -> dict[str, Any]:
    """A candidate file body with the fitted coefficients (4 significant places) over a base candidate's body;
    without a base, one that replays the observed routing, to check the fit against what was observed."""
    body: dict[str, Any] = dict(base) if base else {"name": name, "policy": "observed"}
    body["name"] = name
    pools: dict[str, Any] = {k: dict(v) for k, v in body.get("pools", {}).items()}
    for f in fits:
        if values := rounded(f):
            pools[f.pool] = {**pools.get(f.pool, {}), **values}
    body["pools"] = pools
    return body


def rounded(fit: PoolFit) -> dict[str, float]:
    """The fitted coefficients as a candidate writes them (4 significant places): the file and the page alike."""
    return {k: float(f"{v:.4g}") for k, v in fit.values().items()}
