"""Routing policies: the registry, and each policy's choices on schedules worked out by hand."""

from __future__ import annotations

import dataclasses

import numpy as np
import polars as pl
import pytest

from pool_registry import load_registry
from replay import POLICIES, Candidate, SlaTier, UnknownNameError, get_policy, load_candidate, run_replay
from replay.exceptions import ReplayError
from tests.conftest import FLEET, REPO
from tests.replay_fleets import chip, fleet, model, pool


def test_registry_fails_helpfully() -> None:
    assert list(POLICIES) == ["round_robin", "least_loaded", "cost_min", "sla_cost", "pd_split", "observed",
                              "prefix_affinity"]
    with pytest.raises(UnknownNameError) as exc:
        get_policy("lor2")
    assert str(exc.value) == ("unknown policy 'lor2'; known: round_robin, least_loaded, cost_min, sla_cost, "
                              "pd_split, observed, prefix_affinity")


def _at_once(n: int, out: int = 1000, model_id: str = "") -> pl.DataFrame:
    return pl.DataFrame({"arrival_ms": [0] * n, "in_tokens": 0, "out_tokens": out, "model": model_id})


def test_round_robin_rotates_and_skips_pools_that_cannot_fit() -> None:
    reg = fleet(pool("a", concurrency=9), pool("b", concurrency=9), pool("c", concurrency=9, model_id="other"),
                models=(model("m"), model("other")))
    pools = run_replay(Candidate(name="r", policy="round_robin"), _at_once(6, model_id="m"), reg, 3)
    order = pools.requests["pool"].to_list()
    assert order in (["a", "b"] * 3, ["b", "a"] * 3)  # c serves another model, so it is never in the turn


def test_least_loaded_balances_outstanding_per_slot() -> None:
    # a: 1 slot, b: 4 slots; a is cheaper per request ($1 vs $8 / 4 slots). Loads (outstanding / slots)
    # before each of six simultaneous requests:
    # (0, 0) -> a; (1, 0) -> b; (1, .25) -> b; (1, .5) -> b; (1, .75) -> b; (1, 1) tie -> the cheaper, a.
    reg = fleet(pool("a", cost=1.0), pool("b", concurrency=4, cost=8.0))
    rows = run_replay(Candidate(name="l", policy="least_loaded"), _at_once(6), reg, 0).requests
    assert rows["pool"].to_list() == ["a", "b", "b", "b", "b", "a"]


def test_queue_limit_is_a_hard_constraint_for_every_policy() -> None:
    reg = fleet(pool("a", cost=1.0, max_queue=1), pool("b", cost=2.0, max_queue=1))
    for name in ("round_robin", "least_loaded", "cost_min", "sla_cost"):
        rows = run_replay(Candidate(name=name, policy=name, overflow="reject"), _at_once(6), reg, 0).requests
        # Each pool runs one and queues one; the other two requests are overflow.
        assert rows["outcome"].to_list().count("served") == 4, name
        assert rows["overflow"].to_list().count("reject") == 2, name


PD_FLEET = fleet(pool("pre", chip_id="compute", cost=4.0), pool("dec", chip_id="memory", cost=1.0),
                 chips=(chip("compute", tflops=2000.0, link_gbps=400.0), chip("memory", tflops=100.0, link_gbps=100.0)))
PD = Candidate(name="pd", policy="pd_split", policy_options={"prefill": ("pre",), "decode": ("dec",)})


KV = 2 * 10 * 8 * 128 * 2                                 # 40,960 B per token
TRANSFER = 1000 * KV / 100e9                             # 1000 tokens over the slower 100 GB/s link
# 99 decode passes after the first token: 2e10 B of weights at 2e12 B/s plus a context of 1001 + j tokens
DECODE = 99 * 0.01 + KV / 2e12 * sum(range(1001, 1100))


def test_pd_split_times_and_cost_by_hand() -> None:
    traffic = pl.DataFrame({"arrival_ms": [0], "in_tokens": [1000], "out_tokens": [100]})
    row = run_replay(PD, traffic, PD_FLEET, 0).requests.row(0, named=True)
    prefill = 2 * 1000 * 10e9 / (2000e12 * 0.5)          # 0.02 s on the compute chip, compute-bound
    assert (row["pool"], row["decode_pool"]) == ("pre", "dec")
    assert row["ttft_s"] == pytest.approx(prefill)
    assert row["e2e_s"] == pytest.approx(prefill + TRANSFER + DECODE)
    assert row["cost_usd"] == pytest.approx((prefill * 4.0 + DECODE * 1.0) / 3600)


def test_pd_split_queues_decode_fcfs_in_landing_order() -> None:
    # Two requests at once on single-sequence replicas: the prefills run back to back (0.02 s each), the second
    # cache lands later and waits for the decode replica until the first decode ends.
    traffic = pl.DataFrame({"arrival_ms": [0, 0], "in_tokens": [1000, 1000], "out_tokens": [100, 100]})
    rows = run_replay(PD, traffic, PD_FLEET, 0).requests
    first_end = 0.02 + TRANSFER + DECODE
    assert rows["ttft_s"].to_list() == pytest.approx([0.02, 0.04])
    assert rows["e2e_s"].to_list() == pytest.approx([first_end, first_end + DECODE])
    # Wait counts both stages: 0.02 s for the prefill replica, then from landing to the decode replica's turn.
    assert rows["wait_s"][1] == pytest.approx(0.02 + (first_end - (0.04 + TRANSFER)))


def test_pd_split_respects_ttft_limits_and_overflows() -> None:
    tiers = {"standard": SlaTier(ttft_s=0.03)}
    traffic = pl.DataFrame({"arrival_ms": [0, 0, 0], "in_tokens": 1000, "out_tokens": 1})
    cand = Candidate(name="pd", policy="pd_split", policy_options={"prefill": ("pre",), "decode": ("dec",)},
                     sla_tiers=tiers, overflow="reject")
    rows = run_replay(cand, traffic, PD_FLEET, 0).requests
    # The second waits 0.02 s: TTFT 0.04 > 0.03, and there is no other prefill pool.
    assert rows["outcome"].to_list() == ["served", "rejected", "rejected"]


def test_pd_split_refuses_stage_pools_that_are_disabled() -> None:
    cand = Candidate(name="pd", policy="pd_split", policy_options={"prefill": ("gone",), "decode": ("dec",)})
    with pytest.raises(ReplayError, match="pd_split prefill pool 'gone' is disabled or does not serve"):
        run_replay(cand, _at_once(1), PD_FLEET, 0)


def test_pd_split_serves_other_models_whole_where_they_arrive() -> None:
    reg = fleet(pool("pre", chip_id="compute", cost=4.0), pool("dec", chip_id="memory", cost=1.0),
                pool("other", model_id="o"), models=(model("m"), model("o")),
                chips=(chip("compute", tflops=2000.0), chip("memory", tflops=100.0), chip()))
    traffic = pl.DataFrame({"arrival_ms": [0, 0], "in_tokens": 1000, "out_tokens": 100, "model": ["m", "o"]})
    rows = run_replay(PD, traffic, reg, 0).requests
    assert rows.select("pool", "decode_pool", "outcome").rows() == [("pre", "dec", "served"),
                                                                     ("other", "other", "served")]


def _busy_llama_traffic(n: int = 1200, rate: float = 60.0, seed: int = 5) -> pl.DataFrame:
    """Two minutes of llama traffic in three tiers, enough to fill the cheap pools so that SLA-aware routers
    weigh every pool."""
    rng = np.random.default_rng(seed)
    arrival = np.cumsum(rng.exponential(1 / rate, n))
    return pl.DataFrame({"arrival_ms": np.round(arrival * 1000).astype(np.int64) + 1_735_689_600_000,
                         "in_tokens": rng.integers(100, 6000, n), "out_tokens": rng.integers(16, 800, n),
                         "model": "llama-3.1-70b",
                         "sla_tier": rng.choice(["standard", "premium", "batch"], n, p=[0.6, 0.25, 0.15])})


def _route(rows: pl.DataFrame, k: int) -> tuple[object, ...]:
    row = rows.row(k, named=True)
    return row["pool"], row["replica"], row["decode_pool"]


@pytest.mark.slow  # two full replays per policy
@pytest.mark.parametrize("policy", ["round_robin", "least_loaded", "cost_min", "sla_cost", "pd_split"])
def test_a_route_does_not_depend_on_the_requests_own_output_length(policy: str) -> None:
    """A gateway routes before a request has generated anything: changing one request's out_tokens (x8 or /8)
    must leave its pool, replica and decode pool as they were. 30 probes through a busy trace; each run stops
    40 arrivals after its probe (later arrivals cannot change where the probe went, and the base run is cut
    the same way). `observed` replays recorded routing and is exempt."""
    example = load_registry(FLEET)
    name = "pd_split" if policy == "pd_split" else "sla_cost"
    cand = load_candidate(REPO / "examples" / "candidates" / f"{name}.yaml", example)
    cand = dataclasses.replace(cand, policy=policy) if policy != "pd_split" else cand
    traffic = _busy_llama_traffic()
    moved = []
    for k in np.linspace(400, traffic.height - 60, 30).astype(int).tolist():
        cut = traffic.head(k + 40)
        base = _route(run_replay(cand, cut, example, 0).requests, k)
        for factor in (8.0, 0.125):
            probe = cut.with_columns(pl.when(pl.int_range(pl.len()) == k)
                                     .then((pl.col("out_tokens") * factor).round().cast(pl.Int64))
                                     .otherwise(pl.col("out_tokens")).alias("out_tokens"))
            route = _route(run_replay(cand, probe, example, 0).requests, k)
            if route != base:
                moved.append((k, factor, base, route))
    assert moved == []
