"""Calibrating chosen pools alone, and pools whose observed requests cannot be fitted."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest

from replay import Candidate, PoolOverride, run_replay
from replay.calibrate import calibrate
from replay.exceptions import ReplayError
from tests.replay_fleets import chip, fleet, model, pool

REG = fleet(pool("a", chip_id="x", dpr=2), pool("b", chip_id="x", dpr=4), pool("c", chip_id="y"),
            chips=(chip("x"), chip("y")), models=(model("m", params_b=20.0),))


def requests(pool_id: str, n: int, outcome: str = "ok", ttft: float | None = 0.2) -> pl.DataFrame:
    """n observed requests of one pool, one a second."""
    return pl.DataFrame({"arrival_ms": [1000 * k for k in range(n)], "in_tokens": [500] * n, "out_tokens": [50] * n,
                         "obs_pool": [pool_id] * n, "obs_ttft_s": [ttft] * n, "obs_e2e_s": [1.0] * n,
                         "outcome": [outcome] * n}, schema_overrides={"obs_ttft_s": pl.Float64})


@pytest.mark.parametrize(("frame", "why"), [
    (requests("a", 30, outcome="error"), "none of the 30 observed requests of a can be fitted (30 failed, 0 without "
                                         "a TTFT)"),
    (requests("a", 12, ttft=None), "none of the 12 observed requests of a can be fitted (0 failed, 12 without a "
                                   "TTFT)"),
    (requests("a", 5, ttft=math.nan), "none of the 5 observed requests of a can be fitted (0 failed, 5 without a "
                                      "TTFT)"),
    (pl.concat([requests("a", 4, outcome="error"), requests("a", 3, ttft=0.0)]),
     "none of the 7 observed requests of a can be fitted (4 failed, 3 without a TTFT)"),
])
def test_a_pool_with_no_usable_request_is_not_fitted_and_says_why(frame: pl.DataFrame, why: str) -> None:
    fits, unknown = calibrate(frame, REG)
    assert unknown == {}
    (f,) = fits  # and its sibling b takes no fit made of nothing
    assert (f.pool, f.mfu, f.values(), f.coefficients, f.carried_from) == ("a", None, {}, (), None)
    assert f.notes == (why + ": pick a window where the pool served requests",)


def test_chosen_pools_must_exist_and_have_evidence() -> None:
    frame = requests("c", 40)
    with pytest.raises(ReplayError, match=r"unknown pool 'zz' to calibrate; replayable: a, b, c"):
        calibrate(frame, REG, pools=["zz"])
    with pytest.raises(ReplayError, match=r"nothing to calibrate a, b from: no observed requests and no benchmark "
                                          r"rows of these pools"):
        calibrate(frame, REG, pools=["a", "b"])


def test_another_pools_requests_are_left_out_of_a_chosen_pools_fit() -> None:
    # b's requests all failed; a alone is chosen, so b neither lends evidence nor gets a line
    frame = pl.concat([requests("b", 30, outcome="error"), requests("c", 40)])
    (f,), _ = calibrate(frame, REG, pools=["b"])
    assert f.pool == "b" and f.mfu is None
    (g,), _ = calibrate(frame, REG, pools=["c"])
    assert g.pool == "c" and g.n_ttft == 40 and g.mfu is not None


def test_a_short_trace_of_varied_prompts_is_fitted() -> None:
    # 300 requests over 24 prompt-length groups would leave every group below the 20 requests one needs; fewer,
    # larger groups keep them all, and the planted mfu comes back
    rng = np.random.default_rng(3)
    n = 300
    traffic = pl.DataFrame({"arrival_ms": np.sort(rng.integers(0, 600_000, n)), "in_tokens": rng.integers(100, 6000, n),
                            "out_tokens": rng.integers(2, 300, n), "obs_pool": ["c"] * n})
    planted = Candidate(name="p", policy="observed", pools={"c": PoolOverride(mfu=0.3, mem_bw_eff=0.6)})
    rows = run_replay(planted, traffic, REG, 0).requests
    observed = traffic.with_columns(pl.Series("obs_ttft_s", rows["ttft_s"].to_numpy()),
                                    pl.Series("obs_e2e_s", rows["e2e_s"].to_numpy()))
    (f,), _ = calibrate(observed, REG, pools=["c"])
    assert f.n_ttft == n and f.mfu == pytest.approx(0.3, rel=0.05)
    assert next(c for c in f.coefficients if c.name == "mfu").status == "fitted"
