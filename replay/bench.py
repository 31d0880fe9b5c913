"""A closed-loop serving benchmark of one replica, as `vllm bench serve --max-concurrency N` measures a server.

N clients each send a request of isl prompt tokens asking for osl output tokens, all at time 0, and each sends
the next one the moment its previous one completes, until `requests` have been sent. Reported per
concurrency: TTFT and TPOT percentiles, output tokens/s and requests/s over the run (first send to last
completion). It runs the same replica model as a replay, so a pool's model can be checked against a published
benchmark table before a replay is trusted.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np

from replay.book import Book
from replay.costmodel import StepModel
from replay.errors import ReplayError
from replay.fleet import PoolSpec
from replay.replica import Replica


@dataclass(frozen=True)
class BenchPoint:
    """What a closed-loop run at one concurrency measured (times in ms)."""

    concurrency: int
    ttft_ms_p50: float
    ttft_ms_p99: float
    tpot_ms_p50: float | None
    tpot_ms_p99: float | None
    output_tok_s: float
    req_s: float


def closed_loop(pool: PoolSpec, concurrency: int, isl: int, osl: int, requests: int) -> BenchPoint:
    """Run the benchmark on one replica of the pool."""
    if concurrency < 1 or isl < 0 or osl < 1 or requests < 1:
        raise ReplayError(f"bench needs concurrency >= 1, isl >= 0, osl >= 1 and requests >= 1; got "
                          f"concurrency {concurrency}, isl {isl}, osl {osl}, requests {requests}")
    if isl + osl > pool.kv_capacity_tokens:
        raise ReplayError(f"pool {pool.id}: a request of {isl} + {osl} tokens does not fit the replica's KV cache "
                          f"of {pool.kv_capacity_tokens} tokens")
    book = Book(requests, [0] * requests)
    heap: list[tuple[float, int, int]] = []
    replica = Replica(0, 0, 0, StepModel.of(pool), max_concurrency=pool.max_concurrency,
                      budget=pool.max_num_batched_tokens, kv_capacity=pool.kv_capacity_tokens,
                      rate=pool.replica_cost_per_s, book=book, push=lambda e: heapq.heappush(heap, e),
                      loads=[0], queues=[0])
    start = [0.0] * requests
    done: list[float] = []
    sent = 0

    def on_done(i: int, t: float) -> None:
        done.append(t)

    replica.on_done = on_done
    while sent < min(concurrency, requests):
        book.load(sent, isl, isl, osl)
        replica.arrive(sent, 0.0)
        sent += 1
    while heap:
        t, ver, _ = heapq.heappop(heap)
        if ver != replica.ver:
            continue
        replica.boundary(t)
        while done:  # each completion frees a client, which sends its next request at once
            done.pop()
            if sent < requests:
                book.load(sent, isl, isl, osl)
                start[sent] = t
                replica.arrive(sent, t)
                sent += 1
    first, end = np.array(book.first), np.array(book.done)
    ttft = (first - np.array(start)) * 1000
    tpot = (end - first) / (osl - 1) * 1000 if osl > 1 else None
    span = float(end.max())
    return BenchPoint(concurrency=concurrency, ttft_ms_p50=float(np.percentile(ttft, 50)),
                      ttft_ms_p99=float(np.percentile(ttft, 99)),
                      tpot_ms_p50=None if tpot is None else float(np.percentile(tpot, 50)),
                      tpot_ms_p99=None if tpot is None else float(np.percentile(tpot, 99)),
                      output_tok_s=requests * osl / span if span > 0 else 0.0,
                      req_s=requests / span if span > 0 else 0.0)


def default_requests(concurrency: int) -> int:
    """Enough requests for a few waves of clients: ten per client, at least 100."""
    return max(100, 10 * concurrency)
