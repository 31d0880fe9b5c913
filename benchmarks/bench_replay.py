"""Replay speed: 1M requests over 6 pools with sla_cost on one core, against a bare FCFS heap loop, and a
32-candidate sweep on 2 workers against 1.

Run: .venv/bin/python -m benchmarks.bench_replay [--requests N] [--rate R] [--sweep-requests N] [--no-sweep]
"""

from __future__ import annotations

import argparse
import dataclasses
import heapq
import os
import time
from collections import deque

from benchmarks.common import report, single_core, timed

single_core()

import numpy as np  # noqa: E402  (after the thread limits)
import polars as pl  # noqa: E402

from pool_registry import Pool, Registry, load_registry  # noqa: E402
from replay import Candidate, SlaTier, expand, load_grid_text, run_replay, run_sweep  # noqa: E402
from replay.engine import prepare_traffic  # noqa: E402
from replay.fleet import resolve_pools  # noqa: E402
from replay.plan import build_plan  # noqa: E402
from replay.policies import get_policy  # noqa: E402
from replay.simulator import simulate  # noqa: E402
from replay.summary import build  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def six_pool_fleet() -> Registry:
    """The example fleet plus a second, cheaper H100 pool: six pools, every one a candidate for '' requests."""
    reg = load_registry(os.path.join(REPO, "examples", "fleet.yaml"))
    h100: Pool = reg.pool("h100-a")
    assert h100.serving is not None
    extra = dataclasses.replace(h100, id="h100-b", hourly_cost_per_device=2.9,
                                serving=dataclasses.replace(h100.serving, replicas=4), devices=16)
    return dataclasses.replace(reg, pools=(*reg.pools, extra))


def traffic(n: int, rate: float, seed: int = 1) -> pl.DataFrame:
    """Poisson arrivals with Azure-conversation-like token counts (lognormal prompts, answers)."""
    rng = np.random.default_rng(seed)
    arrival = np.cumsum(rng.exponential(1 / rate, n))
    return pl.DataFrame({
        "arrival_ms": np.round(arrival * 1000).astype(np.int64) + 1_735_689_600_000,
        "in_tokens": np.clip(rng.lognormal(6.7, 0.9, n), 2, 14000).astype(np.int64),
        "out_tokens": np.clip(rng.lognormal(4.9, 0.9, n), 1, 1000).astype(np.int64),
    })


def bare_heap_loop(arrival: list[float], service: list[float], slots: int) -> float:
    """The floor of any Python event loop: FCFS on one pool, one heap operation per request."""
    heap = [0.0] * slots
    replace = heapq.heapreplace
    busy_until = 0.0
    for t, s in zip(arrival, service, strict=True):
        f = heap[0]
        busy_until = (f if f > t else t) + s
        replace(heap, busy_until)
    return busy_until


def event_list_loop(arrival: list[float], service: list[float], slots: int) -> int:
    """The textbook loop: one future-event heap of (time, kind, id) tuples, arrivals and departures as events,
    and an explicit FCFS waiting line."""
    events = [(t, 1, i) for i, t in enumerate(arrival)]
    heapq.heapify(events)
    free, done = slots, 0
    line: deque[int] = deque()
    pop, push = heapq.heappop, heapq.heappush
    while events:
        t, kind, i = pop(events)
        if kind == 0:
            done += 1
            if line:
                j = line.popleft()
                push(events, (t + service[j], 0, j))
            else:
                free += 1
        elif free:
            free -= 1
            push(events, (t + service[i], 0, i))
        else:
            line.append(i)
    return done


def bench_replay(n: int, rate: float) -> None:
    reg = six_pool_fleet()
    cand = Candidate(name="bench", policy="sla_cost", sla_tiers={"standard": SlaTier(ttft_s=1.0, e2e_s=30.0)})
    frame = traffic(n, rate=rate)
    print(f"replay: {n:,} requests at {rate:g}/s, {len(reg.pools)} pools, sla_cost, POLARS_MAX_THREADS=1",
          flush=True)
    first, _ = timed(lambda: run_replay(cand, frame, reg, 0))
    seconds, result = timed(lambda: run_replay(cand, frame, reg, 0), repeat=3)
    s = result.summary
    mix = {k: v.requests for k, v in s.pools.items()}
    print(f"  served {s.served:,}, overflow {s.overflow}, SLA violations {s.sla_violation_rate:.2%}", flush=True)
    print(f"  routing mix {mix}", flush=True)
    print(f"  utilization { {k: round(v, 2) for k, v in s.utilization.items()} }", flush=True)
    # The same arrivals through the bare loop, with the service times the replay used on its busiest pool.
    prepared = prepare_traffic(frame)
    plan = build_plan(prepared, resolve_pools(reg, cand), cand, np.random.default_rng(0))
    busiest = max(range(len(plan.pools)), key=lambda k: list(mix.values())[k])
    arrival, service = plan.arrival.tolist(), plan.service[busiest].tolist()
    bare, _ = timed(lambda: bare_heap_loop(arrival, service, plan.pools[busiest].slots), repeat=3)
    textbook, _ = timed(lambda: event_list_loop(arrival, service, plan.pools[busiest].slots), repeat=3)
    speed, bare_rate, textbook_rate = n / seconds, n / bare, n / textbook
    report("replay run_replay, first run in the process", n / first, "req/s")
    report("replay run_replay, best of 3", speed, "req/s", bare_rate, "of bare FCFS heap loop")
    report("bare FCFS heap loop (slot heap, 1 pool)", bare_rate, "req/s")
    report("textbook event-list loop (1 pool)", textbook_rate, "req/s")
    report("replay vs textbook event-list loop", speed / textbook_rate, "x")
    # Where the time goes, on a warm run.
    t0 = time.perf_counter()
    prepared = prepare_traffic(frame)
    plan = build_plan(prepared, resolve_pools(reg, cand), cand, np.random.default_rng(0))
    t1 = time.perf_counter()
    _ = plan.arrival_list, plan.service_rows, plan.slack_rows
    t2 = time.perf_counter()
    raw = simulate(plan, get_policy("sla_cost"), cand.overflow)
    t3 = time.perf_counter()
    build(plan, raw, prepared, candidate=cand.name, policy=cand.policy, seed=0, drain_s=None)
    t4 = time.perf_counter()
    print(f"  breakdown: plan (vectorized) {t1 - t0:.2f} s, lists for the loop {t2 - t1:.2f} s, "
          f"event loop {t3 - t2:.2f} s, rows and summary {t4 - t3:.2f} s", flush=True)


def bench_sweep(n: int) -> None:
    reg = six_pool_fleet()
    base = Candidate(name="bench", policy="sla_cost", sla_tiers={"standard": SlaTier(ttft_s=1.0, e2e_s=30.0)})
    grid = load_grid_text("parameters:\n  policy: [sla_cost, cost_min]\n  pools.h100-b.replicas: [1, 2, 4, 8]\n"
                          "  pools.gaudi3-a.replicas: [2, 4, 6, 8]\n", reg)
    points = expand(grid, base)
    frame = traffic(n, rate=2000.0)
    print(f"sweep: {len(points)} candidates x {n:,} requests", flush=True)
    one, table1 = timed(lambda: run_sweep(points, frame, reg, 0, workers=1))
    two, table2 = timed(lambda: run_sweep(points, frame, reg, 0, workers=2))
    assert table1.equals(table2)
    report("sweep on 1 worker", one, "s")
    report("sweep on 2 workers", two, "s")
    report("speed-up 2 workers vs 1", one / two, "x")
    print(f"  Pareto front: {table1.filter(pl.col('pareto')).height} of {table1.height} points", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=1_000_000)
    parser.add_argument("--rate", type=float, default=2000.0, help="arrivals per second (2000 loads 5 of 6 pools)")
    parser.add_argument("--sweep-requests", type=int, default=200_000)
    parser.add_argument("--no-sweep", action="store_true")
    args = parser.parse_args()
    bench_replay(args.requests, args.rate)
    if not args.no_sweep:
        bench_sweep(args.sweep_requests)


if __name__ == "__main__":
    main()
