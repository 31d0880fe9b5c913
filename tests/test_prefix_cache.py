"""The prefix cache of a replica (replay/replica/cache.py): blocks its prefills computed, shared ones counted once,
evicted least recently used first, and the prefill that reuses them computing only the rest.

The hand-built case's step model: 1 ms of compute per prompt token and 1 ms of memory per pass (weights read at
1e-12 s a byte), nothing else, so a prefill pass of n prompt tokens takes n ms and a decode pass of one sequence 1 ms.
Blocks are 16 tokens.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replay.book import Book
from replay.replica import INF, Replica
from replay.replica.cache import PrefixCache
from replay.step import StepModel

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
    assert list(a.cache.lru) == [3, 2, 1] and a.cache.unref_tokens == 48 and a.kv_held == 0
    send(a, 2, 0.1, out=2)
    # r2 reuses A's blocks 1 and 2 (32 tokens) and computes only its 8 others: an 8 ms pass instead of 40 ms
    assert book.cached[2] == 32 and book.rem[2] == 8
    # its 40 tokens are held; of A's 50, 10 are left for cached blocks: block 3, r0's tail and the least recently
    # used, goes (16 tokens)
    assert a.kv_held == 40 and a.cache.evicted == 1 and 3 not in a.cache.ref
    settle(a, b)
    assert book.first[2] == pytest.approx(0.1 + 8 * MS) and book.done[2] == pytest.approx(0.1 + 9 * MS)
    assert sorted(a.cache.ref) == sorted(b.cache.ref) == [1, 2, 9] and b.cache.evicted == 0
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
    assert list(cache.lru) == [3, 2, 1]
    assert cache.acquire([1], BLOCK, 16) == (15, 0)  # the whole prompt is one block: its last token is computed
    cache.evict(16)
    assert list(cache.lru) == [2] and cache.evicted == 1 and cache.unref_tokens == 16


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
        assert cache.unref_tokens == sum(cache.size[b] for b in cache.lru)
        assert all((c == 0) == (b in cache.lru) for b, c in cache.ref.items())
    for ids in held:
        total += cache.release(ids)
    assert total == 0 and all(c == 0 for c in cache.ref.values())
