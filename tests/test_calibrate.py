"""Calibration recovers cost-model coefficients planted in noisy synthetic observations."""

from __future__ import annotations

import dataclasses

import numpy as np
import polars as pl
import pytest
import yaml

from replay import Candidate, ReplayError, calibrate, calibrated_candidate, load_candidate_text
from replay.costmodel import decode_seconds, prefill_seconds
from replay.fleet import resolve_pools
from tests.replay_fleets import chip, fleet, pool

PLANTED = {"a": (0.37, 0.62), "b": (0.55, 0.81)}
# The registry says 0.5 / 0.5 everywhere: calibration must find the planted values, not echo these.
REG = fleet(pool("a", chip_id="x", dpr=2), pool("b", chip_id="y", dpr=4),
            chips=(chip("x"), chip("y", tflops=1300.0, bw_tbps=5.3)))


def observations(seed: int = 5, n: int = 2000, noise: float = 0.05) -> pl.DataFrame:
    """Requests served on each pool at the planted coefficients, latencies with 5 % multiplicative noise."""
    rng = np.random.default_rng(seed)
    frames = []
    for pool_id, (mfu, eff) in PLANTED.items():
        spec = next(s for s in resolve_pools(REG, Candidate(name="p")) if s.id == pool_id)
        true = dataclasses.replace(spec, mfu=mfu, mem_bw_eff=eff)
        in_t = rng.integers(100, 8000, n).astype(float)
        cached = np.floor(in_t * rng.uniform(0, 0.5, n))
        out_t = rng.integers(10, 800, n).astype(float)
        ttft = prefill_seconds(in_t, cached, true) * (1 + noise * rng.standard_normal(n))
        e2e = ttft + decode_seconds(out_t, true) * (1 + noise * rng.standard_normal(n))
        frames.append(pl.DataFrame({"in_tokens": in_t.astype(int), "cached_tokens": cached.astype(int),
                                    "out_tokens": out_t.astype(int), "obs_pool": pool_id, "obs_ttft_s": ttft,
                                    "obs_e2e_s": e2e}))
    return pl.concat(frames)


def test_planted_coefficients_are_recovered_within_5_percent() -> None:
    fits, unknown = calibrate(observations(), REG)
    assert unknown == {}
    got = {f.pool: f for f in fits}
    for pool_id, (mfu, eff) in PLANTED.items():
        f = got[pool_id]
        assert f.mfu == pytest.approx(mfu, rel=0.05)
        assert f.mem_bw_eff == pytest.approx(eff, rel=0.05)
        # Multiplicative N(0, 0.05) noise: mean |error| = 0.05 x sqrt(2 / pi) = 0.0399.
        assert f.ttft_mape == pytest.approx(0.0399, abs=0.004)
        assert f.tpot_mape == pytest.approx(0.0399, abs=0.004)
        assert f.n_ttft == f.n_decode == 2000


def test_the_fit_writes_a_valid_candidate() -> None:
    fits, _ = calibrate(observations(), REG)
    cand = load_candidate_text(yaml.safe_dump(calibrated_candidate(fits)), REG)
    assert cand.pools["a"].mfu == pytest.approx(0.37, rel=0.05)
    assert cand.pools["b"].mem_bw_eff == pytest.approx(0.81, rel=0.05)


def test_impossible_fits_are_clipped_with_a_note_and_unknown_pools_counted() -> None:
    obs = observations().with_columns(pl.col("obs_ttft_s") / 10)  # ten times faster than peak allows for a
    obs = pl.concat([obs, obs.head(3).with_columns(pl.lit("ghost").alias("obs_pool"))])
    fits, unknown = calibrate(obs, REG)
    a = next(f for f in fits if f.pool == "a")
    assert a.mfu == 1.0 and a.notes[0].startswith("fitted mfu 3.")
    assert unknown == {"ghost": 3}


def test_nothing_observed_is_an_error() -> None:
    frame = observations().with_columns(pl.lit(None, pl.String).alias("obs_pool"))
    with pytest.raises(ReplayError, match="no request has an observed pool"):
        calibrate(frame, REG)
