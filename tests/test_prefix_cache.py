"""The prefix cache of a replica (replay/replica/cache.py): blocks its prefills computed, shared ones counted once,
evicted least recently used first, and the prefill that reuses them computing only the rest.

The hand-built case's step model: 1 ms of compute per prompt token and 1 ms of memory per pass (weights read at
1e-12 s a byte), nothing else, so a prefill pass of n prompt tokens takes n ms and a decode pass of one sequence 1 ms.
Blocks are 16 tokens.
"""

from __future__ import annotations

import dataclasses
import json
from collections import OrderedDict
from pathlib import Path

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pool_registry import Registry, load_registry
from replay import Candidate, read_traffic, run_replay, summary_from_dict
from replay.book import Book
from replay.candidate import PoolOverride
from replay.costmodel import step_model
from replay.engine import ReplayResult
from replay.fleet import resolve_pools
from replay.replica import INF, Replica
from replay.replica.cache import SLACK, PrefixCache
from replay.step import StepModel
from replay.whatif import summary_lines
from tests.replay_fleets import conversations

MS = 1e-3
BLOCK = 16


def two_replicas(blocks: list[list[int]], ins: list[int], kv_capacity: int) -> tuple[Replica, Replica]:
    n = len(blocks)
    step = StepModel(pp=1, s_per_byte=1e-12, s_per_token=MS, kv_bytes=0.0, weight_bytes=MS * 1e12, pick=1.0,
                     overhead_s=0.0)
    book = Book(n, [0] * n, blocks, [BLOCK] * n, ins)
    loads, queues = [0], [0]
    return tuple(Replica(k, 0, k, step, max_concurrency=8, budget=1000, kv_capacity=kv_capacity, rate=3.6, book=book,
                         loads=loads, queues=queues) for k in range(2))  # type: ignore[return-value]


def send(rep: Replica, i: int, t: float, out: int) -> None:
    prompt = rep.book.ins[i]
    rep.book.load(i, prompt, prompt, out, out)
    rep.arrive(i, t)


def settle(*reps: Replica, until: float = INF) -> None:
    while True:
        nxt = min(reps, key=lambda r: r.next_at)
        if nxt.next_at >= INF or nxt.next_at > until:
            return
        nxt.boundary(nxt.next_at)


def test_three_requests_sharing_two_blocks_on_two_replicas_with_an_eviction() -> None:
    # r0 and r2 are 48 and 40 tokens; r0 sends blocks 1, 2, 3; r1 and r2 send 1, 2 and their own 9 (8 tokens)
    a, b = two_replicas([[1, 2, 3], [1, 2, 9], [1, 2, 9]], [48, 40, 40], kv_capacity=50)
    book = a.book
    send(a, 0, 0.0, out=2)
    send(b, 1, 0.0, out=2)  # B's cache is its own: A's blocks 1 and 2 are nothing to it
    settle(a, b, until=0.05)
    assert book.cached[:2] == [0, 0]
    assert book.first[0] == pytest.approx(48 * MS)  # a pass of 48 prompt tokens
    assert book.first[1] == pytest.approx(40 * MS)
    assert book.done[0] == pytest.approx(49 * MS) and book.done[1] == pytest.approx(41 * MS)
    # done: r0's blocks stay cached on A, unreferenced, released last block first (3, then 2, then 1)
    assert a.cache.unreferenced() == [3, 2, 1] and a.cache.unref_tokens == 48 and a.kv_held == 0
    send(a, 2, 0.1, out=2)
    # r2 reuses A's blocks 1 and 2 (32 tokens) and computes only its 8 others: an 8 ms pass instead of 40 ms
    assert book.cached[2] == 32 and book.rem[2] == 8
    # its 40 tokens are held; of A's 50, 10 are left for cached blocks: block 3, r0's tail and the least recently
    # used, goes (16 tokens)
    assert a.kv_held == 40 and a.cache.evicted == 1 and 3 not in a.cache.entry
    settle(a, b)
    assert book.first[2] == pytest.approx(0.1 + 8 * MS) and book.done[2] == pytest.approx(0.1 + 9 * MS)
    assert sorted(a.cache.entry) == sorted(b.cache.entry) == [1, 2, 9] and b.cache.evicted == 0
    assert a.kv_held == b.kv_held == 0 and a.cache.unref_tokens == b.cache.unref_tokens == 40
    # the busy time shows the saving: A ran 48 + 1 + 8 + 1 passes' milliseconds, B 40 + 1
    assert a.busy == pytest.approx(58 * MS) and b.busy == pytest.approx(41 * MS)


def test_shared_blocks_count_once_in_the_kv_held() -> None:
    a, _ = two_replicas([[1, 2], [1, 2, 5]], [32, 40], kv_capacity=1000)
    book = a.book
    send(a, 0, 0.0, out=3)
    send(a, 1, 0.0, out=3)  # admitted behind r0 in the same pass: r0's blocks are present from its admission
    assert book.cached[1] == 32 and book.rem[1] == 8
    # r1's context is 40 tokens, its first 32 in r0's blocks, held already: together 32 + 8
    assert a.kv_held == 40 and a.kv_read == 32
    settle(a)
    assert a.kv_held == 0 and a.cache.unref_tokens == 40 and a.cache.evicted == 0


def test_a_whole_prompt_in_the_cache_still_computes_its_last_token() -> None:
    a, _ = two_replicas([[1, 2], [1, 2]], [32, 32], kv_capacity=1000)
    send(a, 0, 0.0, out=1)
    settle(a)
    send(a, 1, 1.0, out=1)
    assert a.book.cached[1] == 31 and a.book.rem[1] == 1
    settle(a)
    assert a.book.first[1] == pytest.approx(1.0 + 1 * MS)


def test_a_failure_loses_the_cache() -> None:
    a, _ = two_replicas([[1, 2], [1, 2]], [32, 32], kv_capacity=1000)
    send(a, 0, 0.0, out=1)
    settle(a)
    a.fail(1.0)
    a.repair(2.0)
    send(a, 1, 3.0, out=1)
    assert a.book.cached[1] == 0 and a.kv_held == 32


def test_lru_evicts_the_least_recently_released_first() -> None:
    cache = PrefixCache()
    cache.acquire([1, 2], BLOCK, 32)
    cache.acquire([3], BLOCK, 16)
    cache.release([3])
    cache.release([1, 2])
    assert cache.unreferenced() == [3, 2, 1]
    assert cache.acquire([1], BLOCK, 16) == (15, 0)  # the whole prompt is one block: its last token is computed
    cache.evict(16)
    assert cache.unreferenced() == [2] and cache.evicted == 1 and cache.unref_tokens == 16


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.lists(st.integers(0, 6), min_size=1, max_size=4), st.booleans()), min_size=1,
                max_size=30))
def test_references_balance(ops: list[tuple[list[int], bool]]) -> None:
    """Acquire and release in any order: kv changes undo each other and unreferenced tokens are those in the LRU."""
    cache = PrefixCache()
    held: list[list[int]] = []
    total = 0
    for ids, release in ops:
        if release and held:
            total += cache.release(held.pop(0))
        else:
            _, d = cache.acquire(ids, BLOCK, BLOCK * len(ids))
            total -= d
            held.append(ids)
        assert cache.unref_tokens == sum(cache.tokens(b) for b in cache.unreferenced())
        assert all((cache.refs(b) == 0) == (b in cache.unreferenced()) for b in cache.entry)
    for ids in held:
        total += cache.release(ids)
    assert total == 0 and all(cache.refs(b) == 0 for b in cache.entry)



class ReferenceCache:
    """The cache's rules written plainly, for comparison: counts and sizes apart, the LRU an OrderedDict."""

    def __init__(self) -> None:
        self.ref: dict[int, int] = {}
        self.size: dict[int, int] = {}
        self.lru: OrderedDict[int, None] = OrderedDict()
        self.evicted: list[int] = []

    def acquire(self, ids: list[int], in_tokens: int) -> None:
        for k, b in enumerate(ids):
            if b not in self.ref:
                self.ref[b], self.size[b] = 1, min(BLOCK, in_tokens - k * BLOCK)
                continue
            if self.ref[b] == 0:
                del self.lru[b]
            self.ref[b] += 1

    def release(self, ids: list[int]) -> None:
        for b in reversed(ids):
            self.ref[b] -= 1
            if self.ref[b] == 0:
                self.lru[b] = None

    def evict(self, room: int) -> None:
        while sum(self.size[b] for b in self.lru) > room:
            b, _ = self.lru.popitem(last=False)
            del self.ref[b], self.size[b]
            self.evicted.append(b)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2), st.lists(st.integers(0, 5), min_size=1, max_size=3, unique=True),
                          st.integers(1, 4), st.integers(0, 6 * BLOCK)), min_size=1, max_size=60),
       st.sampled_from([-10**9, SLACK]))
def test_the_queue_evicts_as_an_ordered_dict_would(ops: list[tuple[int, list[int], int, int]], slack: int) -> None:
    """Stale places skipped, the queue rebuilt at every release or only past its slack: the same blocks evicted in the
    same order, the same unreferenced ones in LRU order and their tokens, as the plain rules give."""
    cache, ref = PrefixCache(slack), ReferenceCache()
    held: list[list[int]] = []
    for kind, ids, short, room in ops:
        if kind == 0 or not held:
            in_tokens = BLOCK * len(ids) - short  # the last block partial
            cache.acquire(ids, BLOCK, in_tokens)
            ref.acquire(ids, in_tokens)
            held.append(ids)
        elif kind == 1:
            ids = held.pop(0)
            cache.release(ids)
            ref.release(ids)
        else:
            before = (cache.evicted, len(ref.evicted))
            cache.evict(room)
            ref.evict(room)
            assert cache.evicted - before[0] == len(ref.evicted) - before[1]
        assert cache.unreferenced() == list(ref.lru)
        assert cache.unref_tokens == sum(ref.size[b] for b in ref.lru)
        assert sorted(cache.entry) == sorted(ref.ref)
        assert all(cache.refs(b) == ref.ref[b] and cache.tokens(b) == ref.size[b] for b in ref.ref)
    assert cache.evicted == len(ref.evicted)


# --- the replay: reuse follows routing and KV capacity ------------------------------------------------------------

FLEET = Path(__file__).resolve().parent.parent / "examples" / "fleet.yaml"
ONLY_H100 = {p.id: PoolOverride(enabled=False) for p in load_registry(FLEET).pools if p.id != "h100-a"}


def reuse(result: ReplayResult) -> float:
    rows = result.requests
    return float(rows["cached_tokens"].sum() / rows["in_tokens"].sum())


def roomy(registry: Registry) -> Registry:
    """The fleet with H100s of 100 TB: a replica's KV cache holds every block of the Mooncake trace many times."""
    chips = tuple(dataclasses.replace(c, hbm_capacity_gb=100_000.0) if c.id == "h100-sxm" else c
                  for c in registry.chips)
    return dataclasses.replace(registry, chips=chips)


def test_one_replica_with_room_for_every_block_reuses_exactly_the_trace_wide_share(corpus: Path) -> None:
    _, parsed = read_traffic(corpus / "traces" / "mooncake_conversation_trace.jsonl")
    cand = Candidate(name="one", policy="round_robin", pools={**ONLY_H100, "h100-a": PoolOverride(replicas=1)})
    result = run_replay(cand, parsed.frame, roomy(load_registry(FLEET)), 0)
    replayed = result.requests.select("seq", "cached_tokens").sort("seq")
    # the parse's cached_tokens is the trace-wide reuse: one unbounded cache shared by every request
    assert replayed["cached_tokens"].to_list() == parsed.frame.sort("seq")["cached_tokens"].to_list()
    assert result.summary.reuse == pytest.approx(parsed.frame["cached_tokens"].sum() / parsed.frame["in_tokens"].sum())
    assert result.summary.reuse_source == "replayed" and result.summary.pools["h100-a"].blocks_evicted == 0


@settings(max_examples=12, deadline=None)
@given(st.integers(0, 10_000), st.sampled_from([0.5, 0.55, 0.6, 0.7]), st.sampled_from([0.55, 0.6, 0.7, 0.9]))
def test_reuse_never_increases_as_kv_capacity_shrinks(seed: int, small: float, large: float) -> None:
    small, large = min(small, large), max(small, large)
    traffic = conversations(seed, sessions=12, turns=6)
    fleet = load_registry(FLEET)
    got = []
    for util in (small, large):
        cand = Candidate(name="kv", policy="round_robin",
                         pools={**ONLY_H100, "h100-a": PoolOverride(replicas=1, gpu_memory_utilization=util)})
        got.append(reuse(run_replay(cand, traffic, fleet, seed)))
    assert got[0] <= got[1] + 1e-12


def test_a_trace_without_blocks_keeps_its_recorded_reuse() -> None:
    traffic = conversations(1, sessions=3, turns=3).drop("hash_ids", "block_tokens").with_columns(
        (pl.col("in_tokens") // 2).alias("cached_tokens"))
    cand = Candidate(name="rec", policy="round_robin", pools={**ONLY_H100, "h100-a": PoolOverride(replicas=2)})
    result = run_replay(cand, traffic, load_registry(FLEET), 0)
    assert result.requests["cached_tokens"].to_list() == traffic["cached_tokens"].to_list()
    assert result.summary.reuse_source == "recorded"
    assert result.summary.pools["h100-a"].blocks_evicted == 0
    assert "taken as the trace recorded it" in "\n".join(summary_lines([("rec", result.summary)]))


def test_the_summary_prices_what_reuse_saved() -> None:
    traffic = conversations(2, sessions=4, turns=4)
    fleet = load_registry(FLEET)
    cand = Candidate(name="s", policy="round_robin", pools={**ONLY_H100, "h100-a": PoolOverride(replicas=1)})
    result = run_replay(cand, traffic, fleet, 0)
    pool = result.summary.pools["h100-a"]
    spec = resolve_pools(fleet, cand)[0]
    step = step_model(spec)
    rows = result.requests
    n, c = rows["in_tokens"].to_numpy().astype(float), rows["cached_tokens"].to_numpy().astype(float)
    # by hand: prompt compute n (s_per_token + s_per_ctx n / 2) less that of the n - c tokens computed
    spt, ctx = step.s_per_token, step.s_per_ctx
    skipped = n * (spt + ctx * n / 2) - (n - c) * (spt + ctx * (n + c) / 2)
    assert pool.reuse == pytest.approx(c.sum() / n.sum()) and pool.reuse > 0.3
    assert pool.ttft_saved_s == pytest.approx(skipped.mean())
    assert pool.busy_cost_saved_usd == pytest.approx(skipped.sum() * spec.devices_per_replica
                                                     * spec.hourly_cost_per_device / 3600)
    again = summary_from_dict(json.loads(json.dumps(result.summary.to_dict())))
    assert again.pools["h100-a"] == pool and again.reuse == result.summary.reuse
