"""prefix_affinity, and what every router may read of the replicas' prefix caches: only what KV events have told a
gateway, never a block of a request that has not arrived; cost_min pricing a request with the prefix it would reuse."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from pool_registry import load_registry
from replay import POLICIES, Candidate, get_policy, load_candidate_text, read_traffic, run_replay
from replay.book import Book
from replay.candidate import PoolOverride
from replay.engine import prepare_traffic
from replay.exceptions import CandidateError
from replay.fleet import resolve_pools
from replay.plan import build_plan
from replay.policies.base import State
from replay.simulator import build_replicas
from tests.conftest import FLEET
from tests.replay_fleets import conversations, fleet, pool

ONLY_H100 = {p.id: PoolOverride(enabled=False) for p in load_registry(FLEET).pools if p.id != "h100-a"}


def test_the_registry_knows_it_and_a_candidate_sets_its_weights() -> None:
    assert "prefix_affinity" in POLICIES and get_policy("prefix_affinity").name == "prefix_affinity"
    cand = load_candidate_text("name: pa\npolicy: {name: prefix_affinity, prefix_weight: 2, load_weight: 0.5}\n",
                               load_registry(FLEET), "pa.yaml")
    assert cand.policy_options == {"prefix_weight": ("2",), "load_weight": ("0.5",)}


@pytest.mark.parametrize(("options", "problem"), [
    ({"affinity": ("1",)}, "policy 'prefix_affinity' has no option 'affinity'; options: prefix_weight, load_weight"),
    ({"prefix_weight": ("-1",)}, "policy option prefix_weight must be one number at least 0, got '-1'"),
    ({"load_weight": ("lots",)}, "policy option load_weight must be one number at least 0, got 'lots'"),
    ({"load_weight": ("inf",)}, "policy option load_weight must be one number at least 0, got 'inf'"),
    ({"prefix_weight": ("0",), "load_weight": ("0",)},
     "policy 'prefix_affinity' needs prefix_weight or load_weight above 0"),
])
def test_bad_weights_are_refused_by_name(options: dict[str, tuple[str, ...]], problem: str) -> None:
    assert get_policy("prefix_affinity").check_options(options) == [problem]
    with pytest.raises(CandidateError, match=re.escape(problem)):
        load_candidate_text("name: pa\npolicy: {name: prefix_affinity, "
                            + ", ".join(f"{k}: '{v[0]}'" for k, v in options.items()) + "}\n",
                            load_registry(FLEET), "pa.yaml")


def _growing(n: int) -> pl.DataFrame:
    """n requests at once, each resending the one before and one more 512-token block: r_k has blocks 1..k+3."""
    return pl.DataFrame({"arrival_ms": [0] * n, "in_tokens": [512 * (k + 3) for k in range(n)], "out_tokens": 50,
                         "hash_ids": [list(range(1, k + 4)) for k in range(n)], "block_tokens": 512})


@pytest.mark.parametrize(("weights", "replicas"), [
    # score = reuse / prompt - running / 4. r1: 1536/2048 - 1/4 = 0.5 on replica 0 against 0 on replica 1;
    # r2: 2048/2560 - 2/4 = 0.3; r3: 2560/3072 - 3/4 = 0.08; r4: 3072/3584 - 4/4 < 0: replica 1
    ({}, [0, 0, 0, 0, 1]),
    # load 4 times heavier: r1: 0.75 - 1 on 0 against 0 on 1; r2 finds r1's blocks 1..4 on 1: 2048/2560 - 1 = -0.2
    # against 1536/2560 - 1 = -0.4 on 0; r3: 1536/3072 - 1 = -0.5 on 0 against 2560/3072 - 2 on 1; r4:
    # 3072/3584 - 2 = -1.14 on 0 against 2560/3584 - 2 = -1.29 on 1
    ({"load_weight": ("4",)}, [0, 1, 1, 0, 0]),
    ({"prefix_weight": ("0",)}, [0, 1, 0, 1, 0]),  # load alone: alternate, ties to the lower index
])
def test_prefix_against_load_worked_by_hand(weights: dict[str, tuple[str, ...]], replicas: list[int]) -> None:
    reg = fleet(pool("a", replicas=2, concurrency=4))
    cand = Candidate(name="pa", policy="prefix_affinity", policy_options=weights)
    rows = run_replay(cand, _growing(5), reg, 0).requests
    assert rows["replica"].to_list() == replicas


def test_cost_min_prices_a_request_with_the_prefix_its_replica_would_reuse() -> None:
    # b costs 5 % more than a; request 1's 16-block prompt is cached on b's replica: its prefill nearly free there
    reg = fleet(pool("a", cost=1.0), pool("b", cost=1.05))
    traffic = pl.DataFrame({"arrival_ms": [0, 1000], "in_tokens": [8192, 8192], "out_tokens": [1, 1],
                            "hash_ids": [list(range(100, 116)), list(range(16))], "block_tokens": 512})
    cand = Candidate(name="c", policy="cost_min")
    pools = resolve_pools(reg, cand)
    plan = build_plan(prepare_traffic(traffic), pools, cand, np.random.default_rng(0))
    book = Book(plan.n, [0, 0], plan.blocks, plan.block_tokens, plan.in_list)
    heap: list[tuple[float, int, int]] = []
    replicas, loads, queues = build_replicas(plan, book, 0.0, plan.rng, heap)
    router = get_policy("cost_min").router(plan, State(plan, replicas, loads, queues), {})
    book.load(1, 8192, 8192, 1, 1)
    assert router.route(1, 1.0) is replicas[0][0]  # nothing cached anywhere: the cheaper pool
    cache = replicas[1][0].cache
    assert cache is not None
    cache.release(list(range(16))) if cache.acquire(list(range(16)), 512, 8192) else None  # a past prefill's blocks
    assert router.route(1, 1.0) is replicas[1][0]
    traffic_without = traffic.drop("hash_ids", "block_tokens")
    assert run_replay(cand, traffic_without, reg, 0).requests["pool"].to_list() == ["a", "a"]


def _route(rows: pl.DataFrame, upto: int) -> list[tuple[object, ...]]:
    return rows.head(upto + 1).select("pool", "replica").rows()


@pytest.mark.parametrize("policy", ["prefix_affinity", "cost_min", "sla_cost", "least_loaded"])
def test_a_router_never_reads_a_block_of_a_request_that_has_not_arrived(policy: str) -> None:
    """Give every request after the probe the probe's own blocks and more: had any router read them early (a cache
    filled ahead of time), some route up to the probe would move. Each run stops 40 arrivals after its probe."""
    fleet_ = load_registry(FLEET)
    cand = Candidate(name="p", policy=policy, pools={**ONLY_H100, "h100-a": PoolOverride(replicas=4)})
    traffic = conversations(5, sessions=40, turns=5, gap_s=1.0)
    moved = []
    for k in (60, 110, 160):
        cut = traffic.head(k + 40)
        base = _route(run_replay(cand, cut, fleet_, 0).requests, k)
        late = pl.int_range(pl.len()) > k
        own = cut["hash_ids"][k].to_list()
        probe = cut.with_columns(
            pl.Series("hash_ids", [ids if j <= k else own + ids for j, ids in enumerate(cut["hash_ids"].to_list())]),
            pl.when(late).then(pl.col("in_tokens") + 512 * len(own)).otherwise("in_tokens").alias("in_tokens"))
        if _route(run_replay(cand, probe, fleet_, 0).requests, k) != base:
            moved.append(k)
    assert moved == []


@pytest.mark.slow  # two replays of the 12,031 requests
def test_prefix_affinity_beats_round_robin_on_the_mooncake_conversations(corpus: Path) -> None:
    _, parsed = read_traffic(corpus / "traces" / "mooncake_conversation_trace.jsonl")
    fleet_ = load_registry(FLEET)
    results = {}
    for policy in ("round_robin", "prefix_affinity"):
        cand = Candidate(name=policy, policy=policy, pools={**ONLY_H100, "h100-a": PoolOverride(replicas=16)})
        results[policy] = run_replay(cand, parsed.frame, fleet_, 0)
    rr, pa = results["round_robin"].summary, results["prefix_affinity"].summary
    assert pa.reuse is not None and rr.reuse is not None and pa.reuse > 2 * rr.reuse
    assert pa.ttft_p50 is not None and rr.ttft_p50 is not None and pa.ttft_p50 < rr.ttft_p50
    share = results["prefix_affinity"].requests.group_by("replica").len()["len"].max() / parsed.frame.height
    assert share <= 1 / 16 + 0.03  # its share of 16 replicas and a bounded skew
    assert dataclasses.asdict(pa.pools["h100-a"])["busy_cost_saved_usd"] > rr.pools["h100-a"].busy_cost_saved_usd
