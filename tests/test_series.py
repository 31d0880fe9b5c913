"""Per-pool series over time and latency CDFs of a replay, against the run's own summary."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from pool_registry import Registry
from replay import Candidate, SlaTier, run_replay
from replay.fleet import resolve_pools
from replay.series import bucket_ms, latency_cdf, pool_timeline


def test_series_average_to_the_summary(fleet: Registry) -> None:
    rng = np.random.default_rng(2)
    n = 4000
    traffic = pl.DataFrame({"arrival_ms": np.cumsum(rng.exponential(60, n)).astype(np.int64),
                            "in_tokens": rng.integers(100, 4000, n), "out_tokens": rng.integers(10, 400, n),
                            "model": "llama-3.1-70b"})
    cand = Candidate(name="rr", policy="round_robin", sla_tiers={"standard": SlaTier(e2e_s=60)},
                     drain_s=None)
    result = run_replay(cand, traffic, fleet, 0)
    pools = resolve_pools(fleet, cand)
    step = bucket_ms(result.summary.window_s)
    tl = pool_timeline(result, pools, step)
    assert tl["t"].n_unique() == -(-int(result.summary.window_s * 1000) // step)
    window_ms = result.summary.window_s * 1000
    for spec in pools:
        mine = tl.filter(pl.col("pool") == spec.id)
        length = np.minimum(step, mine["t"].min() + window_ms - mine["t"].to_numpy())  # the last bucket is short
        util = float((mine["utilization"].to_numpy() * length / 1000 * spec.replicas).sum())
        assert util == pytest.approx(result.summary.pools[spec.id].busy_s, rel=1e-9, abs=1e-9)
        kv = float((mine["kv_use"].to_numpy() * length).sum()) / window_ms  # estimated from request lives
        assert kv == pytest.approx(result.summary.kv_use[spec.id], rel=0.05, abs=1e-6)
    per = tl.group_by("t").agg(pl.col("share").sum(), pl.col("requests").sum())
    assert per.filter(pl.col("requests") > 0)["share"].to_numpy() == pytest.approx(1.0)
    assert per.filter(pl.col("requests") == 0)["share"].sum() == 0  # the drain after the last arrival
    assert int(tl["requests"].sum()) == n


def test_cdf_is_the_quantiles_of_served_requests(fleet: Registry) -> None:
    traffic = pl.DataFrame({"arrival_ms": [0, 1000, 2000, 3000], "in_tokens": 500, "out_tokens": [1, 10, 50, 90],
                            "model": "llama-3.1-70b"})
    rows = run_replay(Candidate(name="c"), traffic, fleet, 0).requests
    cdf = latency_cdf(rows, points=3)
    ttft = cdf.filter(pl.col("measure") == "TTFT")["value"].to_list()
    assert ttft == pytest.approx([rows["ttft_s"].min(), rows["ttft_s"].median(), rows["ttft_s"].max()])
    assert cdf.filter(pl.col("measure") == "TPOT").height == 3  # from the three requests with > 1 token
    assert bucket_ms(3600) == 60_000 and bucket_ms(10) == 1000
