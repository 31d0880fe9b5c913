"""Calibration: fit each pool's mfu and mem_bw_eff from observed latencies.

For a pool, the cost model says TTFT = x / mfu with x = 2 (in - cached) active_params / (peak_flops x
devices), and decode time = e2e - TTFT = z / mem_bw_eff with z = out x active_params x bytes_per_param /
(hbm_bw x devices). Both are lines through the origin, fitted by least squares (k = sum(x y) / sum(x^2)),
which is unbiased under multiplicative noise. Queueing inside observed TTFT is not modelled: calibrate on
traffic served without much queueing, or read the fit error. The error is reported as MAPE and R^2 of TTFT
and of time per output token.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from pool_registry import Registry
from replay.candidate import Candidate
from replay.errors import ReplayError
from replay.fleet import PoolSpec, resolve_pools


@dataclass(frozen=True)
class PoolFit:
    """Fitted coefficients of one pool and how well they explain its observations."""

    pool: str
    n_ttft: int
    n_decode: int
    mfu: float | None
    mem_bw_eff: float | None
    ttft_mape: float | None
    ttft_r2: float | None
    tpot_mape: float | None
    tpot_r2: float | None
    notes: tuple[str, ...] = ()


def _fit(x: np.ndarray, y: np.ndarray) -> tuple[float, float, float] | None:
    """(slope, MAPE, R^2) of y ~ k x through the origin, or None when there is nothing to fit."""
    keep = (x > 0) & (y > 0)
    x, y = x[keep], y[keep]
    if x.size == 0:
        return None
    k = float(np.dot(x, y) / np.dot(x, x))
    pred = k * x
    mape = float(np.mean(np.abs(pred - y) / y))
    ss_tot = float(np.sum((y - y.mean()) ** 2))
    r2 = 1.0 - float(np.sum((y - pred) ** 2)) / ss_tot if ss_tot > 0 else 1.0
    return k, mape, r2


def fit_pool(spec: PoolSpec, rows: pl.DataFrame) -> PoolFit:
    """Fit one pool from its observed requests (columns in/out/cached tokens, obs_ttft_s, obs_e2e_s)."""
    notes = []
    in_t = rows["in_tokens"].to_numpy().astype(float)
    cached = rows["cached_tokens"].to_numpy().astype(float)
    out_t = rows["out_tokens"].to_numpy().astype(float)
    ttft = rows["obs_ttft_s"].fill_null(np.nan).to_numpy().astype(float)
    e2e = rows["obs_e2e_s"].fill_null(np.nan).to_numpy().astype(float)
    m = spec.model
    x = 2.0 * (in_t - cached) * m.active_params_b * 1e9 / (spec.chip.peak_tflops_bf16 * 1e12 * spec.devices_per_replica)
    z = out_t * m.active_params_b * 1e9 * m.bytes_per_param / (spec.chip.hbm_bw_tbps * 1e12 * spec.devices_per_replica)
    has_ttft = np.isfinite(ttft)
    pre = _fit(x[has_ttft], ttft[has_ttft])
    has_dec = has_ttft & np.isfinite(e2e) & (out_t > 0)
    dec = _fit(z[has_dec] / out_t[has_dec], (e2e - ttft)[has_dec] / out_t[has_dec])
    mfu = eff = None
    if pre is not None:
        mfu = 1.0 / pre[0]
        if mfu > 1.0:
            notes.append(f"fitted mfu {mfu:.3f} > 1 clipped to 1: observed TTFT is faster than the chip's peak")
            mfu = 1.0
    else:
        notes.append("no usable TTFT observations")
    if dec is not None:
        eff = 1.0 / dec[0]
        if eff > 1.0:
            notes.append(f"fitted mem_bw_eff {eff:.3f} > 1 clipped to 1: decode is faster than HBM bandwidth")
            eff = 1.0
    else:
        notes.append("no usable decode observations (need TTFT, e2e and out_tokens > 0)")
    return PoolFit(pool=spec.id, n_ttft=int(has_ttft.sum()), n_decode=int(has_dec.sum()), mfu=mfu,
                   mem_bw_eff=eff, ttft_mape=pre[1] if pre else None, ttft_r2=pre[2] if pre else None,
                   tpot_mape=dec[1] if dec else None, tpot_r2=dec[2] if dec else None, notes=tuple(notes))


def calibrate(requests: pl.DataFrame, registry: Registry) -> tuple[tuple[PoolFit, ...], dict[str, int]]:
    """Fit every pool that has observations; also return counts of observed pools the fleet does not know."""
    observed = requests.filter(pl.col("obs_pool").is_not_null())
    if observed.height == 0:
        raise ReplayError("no request has an observed pool (obs_pool), so there is nothing to calibrate")
    specs = {s.id: s for s in resolve_pools(registry, Candidate(name="calibrate"))}
    fits, unknown = [], {}
    for (pool_id,), rows in observed.sort("obs_pool").group_by("obs_pool", maintain_order=True):
        spec = specs.get(str(pool_id))
        if spec is None:
            unknown[str(pool_id)] = rows.height
            continue
        fits.append(fit_pool(spec, rows))
    return tuple(fits), unknown


def calibrated_candidate(fits: tuple[PoolFit, ...], name: str = "calibrated",
                         policy: str = "sla_cost") -> dict[str, Any]:
    """A candidate file body that sets the fitted coefficients (rounded to 4 places)."""
    pools: dict[str, Any] = {}
    for f in fits:
        values = {k: round(v, 4) for k, v in (("mfu", f.mfu), ("mem_bw_eff", f.mem_bw_eff)) if v is not None}
        if values:
            pools[f.pool] = values
    return {"name": name, "policy": policy, "pools": pools}
