"""Replay speed: 1M requests over 6 pools with sla_cost on one core, against the slot model the replay used
before continuous batching (kept here only as the baseline), the same traffic with prefix blocks on every request
(conversations, as Mooncake's trace has them) against it without, and a 32-candidate sweep on 2 workers against 1.

Run: .venv/bin/python -m benchmarks.bench_replay [--requests N] [--rate R] [--sweep-requests N] [--no-sweep]
"""

from __future__ import annotations

import argparse
import dataclasses
import heapq
import os
import subprocess
import sys
import time
from collections import deque

from benchmarks.common import report, single_core, timed

single_core()

import numpy as np  # noqa: E402  (after the thread limits)
import polars as pl  # noqa: E402

from pool_registry import Pool, Registry, load_registry  # noqa: E402
from replay import (  # noqa: E402
    Candidate,
    SlaTier,
    expand,
    load_grid_text,
    native,
    run_replay,
    run_sweep,
)
from replay.costmodel import decode_seconds, prefill_seconds  # noqa: E402
from replay.engine import prepare_traffic  # noqa: E402
from replay.fleet import resolve_pools  # noqa: E402
from replay.plan import _cost_orders, _rank, build_plan  # noqa: E402
from replay.policies import get_policy  # noqa: E402
from replay.simulator import simulate  # noqa: E402
from replay.summary import build  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def example_fleet() -> Registry:
    """The example fleet plus a second, cheaper H100 pool: six pools, every one a candidate for '' requests."""
    reg = load_registry(os.path.join(REPO, "examples", "fleet.yaml"))
    h100: Pool = reg.pool("h100-a")
    assert h100.serving is not None
    extra = dataclasses.replace(h100, id="h100-b", hourly_cost_per_device=2.9,
                                serving=dataclasses.replace(h100.serving, replicas=4), devices=16)
    return dataclasses.replace(reg, pools=(*reg.pools, extra))


def six_pool_fleet() -> Registry:
    """The six pools as a registry without the models' shapes describes them: the roofline and its fixed overhead
    alone (no all-reduces, no attention over the context, experts touched as active / total), the baseline every
    figure below was measured on."""
    reg = example_fleet()
    bare = tuple(dataclasses.replace(m, hidden_size=0, attention_heads=0, experts=0, experts_per_token=0)
                 for m in reg.models)
    return dataclasses.replace(reg, models=bare)


def shaped(reg: Registry) -> Registry:
    """The fleet with its models' shapes as examples/fleet.yaml declares them (tensor-parallel all-reduces,
    attention over the context and the experts a batch touches), 2 us a collective hop on every chip's link,
    20 us a running sequence, a serial share of 0.3 of memory and compute and each pass composed while the one before
    runs (async_scheduling): every step term on."""
    declared = {m.id: m for m in example_fleet().models}
    models = tuple(declared.get(m.id, m) for m in reg.models)
    chips = tuple(dataclasses.replace(c, interconnect=dataclasses.replace(c.interconnect, latency_us=2.0))
                  for c in reg.chips)
    pools = tuple(dataclasses.replace(p, serving=dataclasses.replace(p.serving, seq_overhead_us=20.0,
                                                                            async_scheduling=True),
                                      cost_model=dataclasses.replace(p.cost_model, serial_share=0.3))
                  if p.serving is not None else p for p in reg.pools)
    return dataclasses.replace(reg, models=models, chips=chips, pools=pools)


def traffic(n: int, rate: float, seed: int = 1) -> pl.DataFrame:
    """Poisson arrivals with Azure-conversation-like token counts (lognormal prompts, answers)."""
    rng = np.random.default_rng(seed)
    arrival = np.cumsum(rng.exponential(1 / rate, n))
    return pl.DataFrame({
        "arrival_ms": np.round(arrival * 1000).astype(np.int64) + 1_735_689_600_000,
        "in_tokens": np.clip(rng.lognormal(6.7, 0.9, n), 2, 14000).astype(np.int64),
        "out_tokens": np.clip(rng.lognormal(4.9, 0.9, n), 1, 1000).astype(np.int64),
    })


def with_blocks(frame: pl.DataFrame, block: int, seed: int = 2) -> pl.DataFrame:
    """The traffic with prefix blocks on every request, structured as Mooncake's conversations: each request belongs
    to a session (4 requests one on average, its turns spread through the trace) and resends the session's
    conversation so far, its later blocks new; hash_ids covers its whole prompt, ceil(in_tokens / block) blocks."""
    rng = np.random.default_rng(seed)
    n = frame.height
    session = rng.integers(0, max(n // 4, 1), n).tolist()
    convo: dict[int, list[int]] = {}
    ids: list[list[int]] = []
    fresh = 0
    for s, tokens in zip(session, frame["in_tokens"].to_list(), strict=True):
        need = -(-tokens // block)
        have = convo.get(s, [])
        shared = have[:need]
        extra = list(range(fresh, fresh + need - len(shared)))
        fresh += len(extra)
        mine = shared + extra
        if len(mine) > len(have):
            convo[s] = mine
        ids.append(mine)
    return frame.with_columns(pl.Series("hash_ids", ids, dtype=pl.List(pl.Int64)),
                              pl.lit(block, pl.Int64).alias("block_tokens"))


def slot_model(frame: pl.DataFrame, reg: Registry, cand: Candidate) -> tuple[float, int]:
    """The replay's previous engine, as the baseline: every replica is max_concurrency slots at single-request
    speed, each request's service time fixed before the run (prefill compute-bound, decode memory-bound),
    FCFS slot heaps per pool and sla_cost routing on precomputed slack. Returns (seconds, requests served)."""
    start = time.perf_counter()
    pools = resolve_pools(reg, cand)
    prepared = prepare_traffic(frame)
    plan = build_plan(prepared, pools, cand, np.random.default_rng(0))
    in_t, cached, out_t = plan.in_tokens, plan.cached_tokens, plan.out_tokens
    prefill = np.vstack([prefill_seconds(in_t, cached, p) for p in pools])
    service = prefill + np.vstack([decode_seconds(out_t, p) for p in pools])
    cost = np.vstack([service[k] * p.replica_cost_per_s / p.max_concurrency for k, p in enumerate(pools)])
    # static feasibility at the predictions made before the run (the plan ranks later blocks as a run reaches them)
    feasible = _rank(in_t, cached, plan.pred_out.astype(np.float64), plan.max_tokens, plan.serves, pools)[1]
    orders, code = _cost_orders(cost, feasible)
    slack = np.minimum(plan.ttft_limit[None, :] - prefill, plan.e2e_limit[None, :] - service).tolist()
    svc = service.tolist()
    heaps = [[0.0] * p.slots for p in pools]
    waiting: list[deque[float]] = [deque() for _ in pools]
    maxq = [p.max_queue for p in pools]
    served = 0
    replace = heapq.heapreplace
    for i, t in enumerate(plan.arrival.tolist()):
        chosen = -1
        for p in orders[code[i]]:
            f = heaps[p][0]
            if f <= t:
                if slack[p][i] >= 0.0:
                    chosen = p
                    break
            elif f - t <= slack[p][i]:
                q = waiting[p]
                while q and q[0] <= t:
                    q.popleft()
                if len(q) < maxq[p]:
                    chosen = p
                    break
        if chosen < 0:  # overflow: queue where it would finish first
            chosen = min(orders[code[i]], key=lambda p: max(heaps[p][0], t) + svc[p][i])
        h = heaps[chosen]
        f = h[0]
        if f > t:
            waiting[chosen].append(f)
        replace(h, (f if f > t else t) + svc[chosen][i])
        served += 1
    return time.perf_counter() - start, served


CANDIDATE = Candidate(name="bench", policy="sla_cost", sla_tiers={"standard": SlaTier(ttft_s=1.0, e2e_s=30.0)})


def replay_rate(n: int, rate: float) -> tuple[float, float]:
    """Requests per second of run_replay on the plain and the every-term fleet, best of 2 each (a child's part)."""
    reg, frame = six_pool_fleet(), traffic(n, rate=rate)
    plain, _ = timed(lambda: run_replay(CANDIDATE, frame, reg, 0), repeat=2)
    full = shaped(reg)
    terms, _ = timed(lambda: run_replay(CANDIDATE, frame, full, 0), repeat=2)
    return n / plain, n / terms


def pure_python_rates(n: int, rate: float) -> tuple[float, float]:
    """replay_rate in a process that runs the replica as pure Python (HETPOOL_COMPILED=0)."""
    done = subprocess.run([sys.executable, "-m", "benchmarks.bench_replay", "--requests", str(n), "--rate", str(rate),
                           "--rates-only"], capture_output=True, text=True, check=True,
                          env={**os.environ, native.SWITCH: "0"}, cwd=REPO)
    plain, terms = done.stdout.split()[-2:]
    return float(plain), float(terms)


def bench_replay(n: int, rate: float) -> None:
    reg = six_pool_fleet()
    cand = CANDIDATE
    frame = traffic(n, rate=rate)
    print(f"replay: {n:,} requests at {rate:g}/s, {len(reg.pools)} pools, sla_cost, POLARS_MAX_THREADS=1; the "
          f"replica {native.status()}", flush=True)
    first, _ = timed(lambda: run_replay(cand, frame, reg, 0))
    seconds, result = timed(lambda: run_replay(cand, frame, reg, 0), repeat=2)
    s = result.summary
    mix = {k: v.requests for k, v in s.pools.items()}
    print(f"  served {s.served:,}, overflow {s.overflow}, SLA violations {s.sla_violation_rate:.2%}, "
          f"preempted {s.preempted}", flush=True)
    print(f"  routing mix {mix}", flush=True)
    print(f"  utilization { {k: round(v, 2) for k, v in s.utilization.items()} }", flush=True)
    print(f"  ttft p50/p99 {s.ttft_p50}/{s.ttft_p99} s, tpot p50/p99 {s.tpot_p50}/{s.tpot_p99} s", flush=True)
    slot_s, _ = timed(lambda: slot_model(frame, reg, cand), repeat=2)
    speed, slot_rate = n / seconds, n / slot_s
    full = shaped(reg)
    shaped_s, shaped_result = timed(lambda: run_replay(cand, frame, full, 0), repeat=2)
    report("replay run_replay, first run in the process", n / first, "req/s")
    report("replay run_replay, best of 2 (target 100,000)", speed, "req/s", slot_rate, "of the slot model")
    report("slot model (previous engine), best of 2", slot_rate, "req/s")
    report("replay with every step term on, best of 2", n / shaped_s, "req/s", speed, "of the plain fleet's")
    bench_blocks(frame, reg, cand)
    if native.status().startswith("compiled"):
        pure, pure_terms = pure_python_rates(n, rate)
        report("the same as pure Python, best of 2", pure, "req/s")
        report("replay compiled against pure Python", speed / pure, "x")
        report("every step term, compiled against pure Python", n / shaped_s / pure_terms, "x")
    t = shaped_result.summary
    print(f"  with every term: ttft p50/p99 {t.ttft_p50}/{t.ttft_p99} s, tpot p50/p99 {t.tpot_p50}/{t.tpot_p99} s",
          flush=True)
    # Where the time goes, on a warm run.
    t0 = time.perf_counter()
    prepared = prepare_traffic(frame)
    plan = build_plan(prepared, resolve_pools(reg, cand), cand, np.random.default_rng(0))
    _ = plan.arrival_list, plan.prompt_list, plan.in_list, plan.out_list, plan.ttft_list, plan.e2e_list
    t1 = time.perf_counter()
    raw = simulate(plan, get_policy("sla_cost"), {}, cand.overflow)  # its objects are freed as it returns
    t2 = time.perf_counter()
    build(plan, raw, prepared, candidate=cand.name, policy=cand.policy, seed=0, drain_s=None)
    t3 = time.perf_counter()
    print(f"  breakdown: plan (vectorized) {t1 - t0:.2f} s, event loop with freeing its objects {t2 - t1:.2f} s "
          f"({n / (t2 - t1):,.0f} req/s), rows and summary {t3 - t2:.2f} s", flush=True)


def bench_blocks(frame: pl.DataFrame, reg: Registry, cand: Candidate, rounds: int = 2) -> None:
    """The traffic without blocks and with them on every request, timed in turn (a load that drifts during the run
    touches each alike), best of `rounds` each: the rate with blocks against the rate without."""
    n = frame.height
    runs = {"without blocks": frame, **{f"with {b}-token blocks": with_blocks(frame, b) for b in (512, 64)}}
    best = dict.fromkeys(runs, float("inf"))
    results = {}
    for _ in range(rounds):
        for name, traffic_ in runs.items():
            start = time.perf_counter()
            results[name] = run_replay(cand, traffic_, reg, 0)
            best[name] = min(best[name], time.perf_counter() - start)
    plain = n / best["without blocks"]
    report(f"without prefix blocks, best of {rounds} in turn", plain, "req/s")
    for name, traffic_ in list(runs.items())[1:]:
        per = traffic_["hash_ids"].list.len().sum() / max(n, 1)
        s = results[name].summary
        report(f"{name} on every request ({per:.1f} a request; target: half)", n / best[name], "req/s", plain,
               "of the run without")
        print(f"  prefix reuse {s.reuse:.1%}, blocks evicted {sum(p.blocks_evicted for p in s.pools.values()):,}",
              flush=True)


def bench_sweep(n: int) -> None:
    reg = six_pool_fleet()
    base = Candidate(name="bench", policy="sla_cost", sla_tiers={"standard": SlaTier(ttft_s=1.0, e2e_s=30.0)})
    grid = load_grid_text("parameters:\n  policy: [sla_cost, cost_min]\n  pools.mi300x-a.replicas: [1, 2, 3, 4]\n"
                          "  pools.gaudi3-a.replicas: [2, 4, 6, 8]\n", reg)
    points = expand(grid, base)
    frame = traffic(n, rate=150.0)
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
    parser.add_argument("--rate", type=float, default=150.0,
                        help="arrivals per second (150 keeps the cheapest pools busy and meets the SLA)")
    parser.add_argument("--sweep-requests", type=int, default=200_000)
    parser.add_argument("--no-sweep", action="store_true")
    parser.add_argument("--rates-only", action="store_true", help="print only the two replay rates (for a child)")
    parser.add_argument("--blocks-only", action="store_true",
                        help="only the run with prefix blocks on every request against the run without")
    args = parser.parse_args()
    if args.rates_only:
        print(*replay_rate(args.requests, args.rate))
        return
    if args.blocks_only:
        print(f"replay: {args.requests:,} requests at {args.rate:g}/s, six pools, sla_cost; the replica "
              f"{native.status()}", flush=True)
        bench_blocks(traffic(args.requests, rate=args.rate), six_pool_fleet(), CANDIDATE)
        return
    bench_replay(args.requests, args.rate)
    if not args.no_sweep:
        bench_sweep(args.sweep_requests)


if __name__ == "__main__":
    main()
