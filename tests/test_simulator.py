"""The discrete-event simulator against queueing theory and hand-worked schedules.

Unless a test says otherwise its fleets use a model whose KV cache barely weighs (4 B per token), so every
memory-bound pass takes 0.01 s and a request of 100 output tokens decodes in 1 s, alone or batched.
"""

from __future__ import annotations

import gc
import heapq
import importlib.util
import io
import json
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest

from pool_registry import Registry
from replay import Candidate, SlaTier, run_replay
from replay.candidate import PredictorSpec
from replay.whatif import OVERFLOW_SAID, overflow_said, summary_lines
from tests import replay_fleets
from tests.replay_fleets import chip, flat_model, pool


def fleet(*pools: object, chips: object = None, models: object = None) -> Registry:
    """A test fleet on the flat-KV model unless told otherwise."""
    return replay_fleets.fleet(*pools, chips=chips, models=models or (flat_model(),))  # type: ignore[arg-type]

COST_MIN = Candidate(name="t", policy="cost_min")
# Queueing theory's shared FCFS queue is a dispatcher that knows when each server frees: routing on the true
# output lengths. A router that predicts them joins a replica whose queue drains later now and then.
KNOWING = Candidate(name="t", policy="cost_min", predictor=PredictorSpec("oracle"))


def erlang_c(c: int, a: float) -> float:
    """Probability that an arrival waits in M/M/c with offered load a = lambda / mu."""
    head = sum(a**k / math.factorial(k) for k in range(c))
    tail = a**c / math.factorial(c) * c / (c - a)
    return tail / (head + tail)


# Decode reads 1e9 B per pass at 1e13 B/s: 1e-4 s per token. No prefill: the one input token is cached.
QUEUE_FLEET_C = 4
QUEUE_FLEET = fleet(pool("p", replicas=QUEUE_FLEET_C, eff=1.0), chips=(chip(bw_tbps=10.0),),
                    models=(flat_model(params_b=1.0, bpp=1.0, max_context=10**9),))


@pytest.mark.parametrize(("rho", "n"), [(0.5, 100_000), (0.8, 150_000),
                                       pytest.param(0.9, 400_000, marks=pytest.mark.slow)])  # 400,000 requests
def test_mean_wait_matches_erlang_c(rho: float, n: int) -> None:
    """M/M/4 FCFS: Poisson arrivals, exponential service of mean 1 s, mean wait = C(c, a) / (c mu - lambda).

    Four single-sequence replicas with decode-only work: out_tokens ~ Exp(mean 10,000) and each pass takes
    1e-4 s, so service = out x 1e-4 s is exponential to within rounding. Three seeds of n requests each
    (more near saturation, where the mean wait converges slowly), the first 10 % of each cut as warm-up.
    Erlang-C is evaluated at each sample's realised arrival rate and mean service time, which removes the input
    sampling error that dominates near saturation, so what remains is the simulator's own error.
    """
    c = QUEUE_FLEET_C
    simulated, theory = [], []
    for seed in range(3):
        rng = np.random.default_rng(1000 + seed)
        arrival = np.cumsum(rng.exponential(1 / (rho * c), n))
        out = np.maximum(1, np.round(rng.exponential(10_000, n))).astype(np.int64)
        traffic = pl.DataFrame({"arrival_ms": np.round(arrival * 1000).astype(np.int64), "in_tokens": 1,
                                "cached_tokens": 1, "out_tokens": out})
        waits = run_replay(KNOWING, traffic, QUEUE_FLEET, seed).requests["wait_s"].to_numpy()
        simulated.append(waits[n // 10:].mean())
        service = out.mean() * 1e-4
        lam = (n - 1) / (arrival[-1] - arrival[0])
        theory.append(erlang_c(c, lam * service) / (c / service - lam))
    assert np.mean(simulated) == pytest.approx(np.mean(theory), rel=0.03)


def test_batched_schedule_by_hand() -> None:
    # One replica running at most two sequences; each request decodes 100 tokens in 100 passes of 0.01 s,
    # whether it runs alone or beside another (the weights are read once per pass for the whole batch).
    reg = fleet(pool("p", concurrency=2))
    traffic = pl.DataFrame({"arrival_ms": [0, 0, 0, 500, 2500], "in_tokens": 0, "out_tokens": 100})
    rows = run_replay(COST_MIN, traffic, reg, 0).requests
    # The first two start at once and finish at 1 s; the third and the fourth (0.5 s) wait for them and run
    # together until 2 s; the fifth (2.5 s) finds the replica idle. The first token ends the first pass.
    assert rows["wait_s"].to_list() == pytest.approx([0.0, 0.0, 1.0, 0.5, 0.0], abs=1e-6)
    assert rows["e2e_s"].to_list() == pytest.approx([1.0, 1.0, 2.0, 1.5, 1.0], abs=1e-6)
    assert rows["ttft_s"].to_list() == pytest.approx([0.01, 0.01, 1.01, 0.51, 0.01], abs=1e-6)
    assert rows["tpot_s"].to_list() == pytest.approx([0.01] * 5, abs=1e-8)


def test_a_prompt_is_chunked_and_shares_passes_with_decoding() -> None:
    # A 1-sequence decode is running when a 10,000-token prompt arrives; the pass budget is 8192 tokens, so
    # the prompt takes two passes (8191 tokens beside the decoder, then 1809) of compute-bound time
    # (4e-5 s per token), and the decoder's tokens come out of those longer passes too.
    reg = fleet(pool("p", concurrency=4))
    traffic = pl.DataFrame({"arrival_ms": [0, 0], "in_tokens": [0, 10_000], "out_tokens": [3, 2]})
    rows = run_replay(COST_MIN, traffic, reg, 0).requests
    first, second = (8192 * 4e-5, 1810 * 4e-5)
    assert rows["ttft_s"][1] == pytest.approx(first + second)
    # the decoder joined the first pass too: its three tokens end passes 1, 2 and 3 (a plain 0.01 s pass)
    assert rows["e2e_s"][0] == pytest.approx(first + second + 0.01)
    assert rows["e2e_s"][1] == pytest.approx(first + second + 0.01)


def test_arrivals_are_replayed_in_time_order_whatever_the_frame_order() -> None:
    reg = fleet(pool("p"))
    traffic = pl.DataFrame({"seq": [0, 1], "arrival_ms": [1000, 0], "in_tokens": 0, "out_tokens": 100})
    rows = run_replay(COST_MIN, traffic, reg, 0).requests
    assert rows["seq"].to_list() == [1, 0]
    assert rows["wait_s"].to_list() == pytest.approx([0.0, 0.0], abs=1e-6)


def test_the_sla_constraint_moves_traffic_off_a_slow_pool() -> None:
    # "slow" is cheap but its decode takes 0.04 s per token (bandwidth 1 TB/s x 0.5, 2e10 B per token);
    # "fast" decodes at 0.005 s per token and costs 10x, so per request it is 1.25x dearer. A 2 s e2e limit on
    # 100-token answers (slow takes 4 s) rules out the slow pool.
    reg = fleet(pool("slow", chip_id="s", cost=1.0), pool("fast", chip_id="f", cost=10.0),
                chips=(chip("s", bw_tbps=1.0), chip("f", bw_tbps=8.0)))
    traffic = pl.DataFrame({"arrival_ms": [0, 10_000, 20_000], "in_tokens": 100, "out_tokens": 100})
    tiers = {"standard": SlaTier(ttft_s=1.0, e2e_s=2.0)}
    naive = run_replay(Candidate(name="c", policy="cost_min", sla_tiers=tiers), traffic, reg, 0)
    aware = run_replay(Candidate(name="s", policy="sla_cost", sla_tiers=tiers), traffic, reg, 0)
    assert naive.requests["pool"].to_list() == ["slow"] * 3
    assert naive.summary.sla_violation_rate == 1.0
    assert aware.requests["pool"].to_list() == ["fast"] * 3
    assert aware.summary.sla_violation_rate == 0.0
    assert aware.summary.busy_cost_usd > naive.summary.busy_cost_usd


def test_sla_cost_spills_to_the_next_pool_when_the_wait_would_break_the_sla() -> None:
    # Both pools take 1 s per request; cheap has one slot. The second simultaneous request would wait 1 s
    # there (e2e 2 s > 1.5 s), so it goes to the dearer pool; cost_min queues it on the cheap one.
    reg = fleet(pool("cheap", cost=1.0), pool("dear", cost=2.0))
    traffic = pl.DataFrame({"arrival_ms": [0, 0], "in_tokens": 0, "out_tokens": 100})
    tiers = {"standard": SlaTier(e2e_s=1.5)}
    aware = run_replay(Candidate(name="s", policy="sla_cost", sla_tiers=tiers), traffic, reg, 0)
    assert aware.requests["pool"].to_list() == ["cheap", "dear"]
    naive = run_replay(Candidate(name="c", policy="cost_min", sla_tiers=tiers), traffic, reg, 0)
    assert naive.requests["pool"].to_list() == ["cheap", "cheap"]
    assert naive.requests["sla_met"].to_list() == [True, False]


def _overloaded() -> pl.DataFrame:
    # 20 requests at once, each 1 s, on one single-slot pool with room for 5 waiting.
    return pl.DataFrame({"arrival_ms": [0] * 20, "in_tokens": 0, "out_tokens": 100,
                         "model": ["m"] * 19 + ["nope"]})


@pytest.mark.parametrize(("overflow", "served", "rejected", "flag_counts"), [
    ("reject", 6, 14, {"queue": 0, "degrade": 0, "reject": 14}),
    ("queue", 19, 1, {"queue": 13, "degrade": 0, "reject": 1}),
    ("degrade", 19, 1, {"queue": 0, "degrade": 13, "reject": 1}),
])
def test_overflow_accounting(overflow: str, served: int, rejected: int, flag_counts: dict[str, int]) -> None:
    reg = fleet(pool("p", max_queue=5))
    cand = Candidate(name="o", policy="sla_cost", overflow=overflow)
    result = run_replay(cand, _overloaded(), reg, 0)
    s = result.summary
    assert (s.served, s.rejected, s.still_queued) == (served, rejected, 0)
    assert s.served + s.rejected + s.still_queued == s.requests == 20
    assert s.overflow == flag_counts
    rows = result.requests
    assert rows.filter(pl.col("model") == "nope")["reason"][0] == "no pool serves model 'nope'; served: m"
    assert rows["outcome"].value_counts().sort("outcome").rows() == sorted(
        [(k, v) for k, v in (("served", served), ("rejected", rejected)) if v])
    if overflow == "degrade":  # degraded requests are served but never count as meeting the SLA
        assert rows.filter(pl.col("overflow") == "degrade")["sla_met"].to_list() == [False] * 13
    if overflow == "reject":  # the first takes the slot, five wait, the rest are turned away
        assert rows.filter(pl.col("outcome") == "served")["wait_s"].to_list() == pytest.approx([0, 1, 2, 3, 4, 5])
    # the CLI's table spells the overflow out, a row per kind, and says once what each kind means
    lines = summary_lines([("o", s)])
    row = {line[:22].strip(): line[22:].strip() for line in lines}
    assert (row["overflow: queued"], row["overflow: degraded"], row["rejected"]) == (
        str(flag_counts["queue"]), str(flag_counts["degrade"]), str(rejected))
    assert overflow_said(s) == (f"{flag_counts['queue']:,} queued, {flag_counts['degrade']:,} served degraded, "
                                f"{rejected:,} rejected, of 20 requests")
    assert f"note: {OVERFLOW_SAID}" in lines


def test_a_horizon_leaves_unfinished_requests_still_queued() -> None:
    reg = fleet(pool("p"))
    traffic = pl.DataFrame({"arrival_ms": [0, 0, 0, 0], "in_tokens": 0, "out_tokens": 100})
    s = run_replay(Candidate(name="h", policy="cost_min", drain_s=2.5), traffic, reg, 0).summary
    # Finishes at 1, 2, 3, 4 s; the replay stops 2.5 s after the last arrival.
    assert (s.served, s.rejected, s.still_queued) == (2, 0, 2)
    assert s.window_s == 2.5
    assert s.utilization["p"] == pytest.approx(1.0)


def test_same_seed_gives_byte_identical_results() -> None:
    rng = np.random.default_rng(7)
    n = 5_000
    traffic = pl.DataFrame({"arrival_ms": np.sort(rng.integers(0, 600_000, n)), "in_tokens": rng.integers(1, 4000, n),
                            "out_tokens": rng.integers(1, 500, n)})
    reg = fleet(pool("a", replicas=2, concurrency=4, cost=1.0), pool("b", replicas=2, concurrency=4, cost=1.5))
    cand = Candidate(name="n", policy="round_robin", noise=0.3, sla_tiers={"standard": SlaTier(ttft_s=1.0)})

    def run(seed: int) -> tuple[bytes, str]:
        result = run_replay(cand, traffic, reg, seed)
        buf = io.BytesIO()
        result.requests.write_ipc(buf)
        return buf.getvalue(), json.dumps(result.summary.to_dict(), sort_keys=True)

    first, again, other = run(11), run(11), run(12)
    assert first == again
    assert first[0] != other[0]  # the seed drives the service-time noise and the rotation start


def test_utilization_and_provisioned_cost_by_hand() -> None:
    reg = fleet(pool("p", replicas=2, cost=3.6))
    traffic = pl.DataFrame({"arrival_ms": [0, 0, 1000], "in_tokens": 0, "out_tokens": 100})
    s = run_replay(COST_MIN, traffic, reg, 0).summary
    # Three 1 s requests on two slots over a 2 s window (last finish at 2 s): 3 / (2 x 2) busy.
    assert s.window_s == pytest.approx(2.0)
    assert s.utilization["p"] == pytest.approx(0.75)
    assert s.provisioned_cost_usd == pytest.approx(2 * 3.6 * 2 / 3600)
    assert s.busy_cost_usd == pytest.approx(3 * 3.6 / 3600)
    assert s.cost_per_mtok == pytest.approx(s.busy_cost_usd / 300 * 1e6)


def test_more_replicas_never_raise_p99_ttft() -> None:
    """Poisson traffic near one replica's capacity: each added replica takes load off the others."""
    rng = np.random.default_rng(4)
    n = 3000
    traffic = pl.DataFrame({"arrival_ms": np.cumsum(rng.exponential(60, n)).astype(np.int64),
                            "in_tokens": rng.integers(100, 3000, n), "out_tokens": rng.integers(10, 300, n)})
    p99 = []
    for replicas in (1, 2, 3, 4, 6):
        reg = replay_fleets.fleet(pool("p", replicas=replicas, concurrency=16))
        p99.append(run_replay(COST_MIN, traffic, reg, 0).summary.ttft_p99)
    assert p99 == sorted(p99, reverse=True)
    assert p99[0] > 2 * p99[-1]


def test_the_simulator_matches_a_reference_fcfs_multi_server_queue() -> None:
    """With single-sequence replicas and decode-only work, the waits are what a shared FCFS queue before c
    servers gives (each arrival takes the server that frees first) when the router knows the output lengths.
    Routing at arrival estimates the queued work at the current pass time, so near-ties can go the other way:
    almost every wait is exact."""
    rng = np.random.default_rng(9)
    n = 20_000
    arrival = np.cumsum(rng.exponential(1 / (0.9 * QUEUE_FLEET_C), n))
    out = np.maximum(1, np.round(rng.exponential(10_000, n))).astype(np.int64)
    ms = np.round(arrival * 1000).astype(np.int64)
    traffic = pl.DataFrame({"arrival_ms": ms, "in_tokens": 1, "cached_tokens": 1, "out_tokens": out})
    waits = run_replay(KNOWING, traffic, QUEUE_FLEET, 0).requests["wait_s"].to_numpy()
    free = [0.0] * QUEUE_FLEET_C
    expected = []
    t0 = ms[0] / 1000
    for t, k in zip((ms / 1000 - t0).tolist(), out.tolist(), strict=True):
        f = min(free)
        start = max(t, f)
        expected.append(start - t)
        # pass j reads the weights (1e9 B) and 1 + j tokens of 4 B of KV at 1e13 B/s
        free[free.index(f)] = start + k * 1e-4 + 4e-13 * k * (k + 1) / 2
    exact = np.abs(waits - np.array(expected)) < 1e-7
    assert exact.mean() > 0.995
    assert waits.mean() == pytest.approx(np.mean(expected), rel=1e-4)


def _leftover(candidate: Candidate, frame: pl.DataFrame, registry: Registry) -> int:
    """Objects a replay leaves in reference cycles: what only the cyclic collector would free, later."""
    gc.collect()
    gc.disable()
    try:
        run_replay(candidate, frame, registry, 0)
        return gc.collect()
    finally:
        gc.enable()


@pytest.mark.parametrize("case", ["round_robin", "least_loaded", "cost_min", "sla_cost", "pd_split", "faults",
                                  "overlong", "encode"])
def test_a_replay_is_freed_when_it_returns(case: str) -> None:
    """The run's book, replicas and plan hold millions of numbers at scale: their reference counts must free them
    when the run returns (a cycle through the loop's closures kept them, 1 s of collection at 1M requests)."""
    from benchmarks.bench_replay import six_pool_fleet, traffic
    from replay.candidate import FaultSpec, PoolFaults
    reg = six_pool_fleet()
    frame = traffic(2000, rate=150)
    tier = {"standard": SlaTier(ttft_s=1.0, e2e_s=30.0)}
    if case == "faults":
        faults = FaultSpec(repair_s=5.0, pools={p.id: PoolFaults(failures_per_device_hour=200.0) for p in reg.pools})
        candidate = Candidate(name="t", policy="sla_cost", sla_tiers=tier, faults=faults)
    elif case == "overlong":  # the engine stops its output at the context limit
        candidate = Candidate(name="t", policy="pd_split")
        frame = pl.DataFrame({"arrival_ms": [0, 5, 10], "in_tokens": [1000, 1000, 1000],
                              "out_tokens": [10**7, 50, 10**7]})
    elif case == "encode":  # images encoded apart, then their embeddings landing on the prefill pool
        from tests.test_encode_stage import EPD, epd_fleet
        candidate, reg = EPD, epd_fleet(encoders=2, others=2)
        frame = pl.DataFrame({"arrival_ms": list(range(0, 400, 2)), "in_tokens": 500, "out_tokens": 20,
                              "images": [k % 3 for k in range(200)]})
    else:
        candidate = Candidate(name="t", policy=case, sla_tiers=tier)
    assert _leftover(candidate, frame, reg) == 0


class _Run:
    """A replica as `_events` sees it: its version and serial; a boundary ends its run, as a replica going idle does
    (its version moves on)."""

    def __init__(self, serial: int, version: int, log: list[tuple[str, int, float]]) -> None:
        self.serial, self.version, self.log = serial, version, log

    def boundary(self, t: float) -> None:
        self.log.append(("run", self.serial, t))
        self.version += 1


def test_events_come_in_the_order_of_a_heap_of_time_version_and_serial(monkeypatch: pytest.MonkeyPatch) -> None:
    """Run ends, failures, repairs, landings and images encoded apart are handled as one heap of (time, version or
    kind, serial) pops them, none after `until`; a run end whose replica's version moved on (an arrival cut the run
    short) is passed over. The module's source is loaded as pure Python here, which takes stand-in replicas (the
    compiled one takes only its own)."""
    source = Path(__file__).resolve().parents[1] / "replay" / "simulator.py"
    spec = importlib.util.spec_from_file_location("_simulator_source", source)
    assert spec is not None and spec.loader is not None
    pure = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, pure)  # its dataclasses look their module up there
    spec.loader.exec_module(pure)
    log: list[tuple[str, int, float]] = []
    flat = [_Run(0, 5, log), _Run(1, 2, log), _Run(2, 9, log), _Run(3, 0, log), _Run(4, 2, log)]
    runs = [(1.0, 5, 0), (1.0, 2, 1), (0.5, 9, 2), (1.0, 2, 4)]
    void = [(0.7, 4, 0), (0.9, 1, 1)]  # run ends of versions since cut short: replicas 0 and 1 are at 5 and 2 now
    faults = [(1.0, -1, -1 - 7), (1.0, pure.FAIL, 3), (2.0, pure.REPAIR, 3), (1.0, pure.ENCODED, -1 - 8),
              (0.2, pure.EMBEDDED, -1 - 9)]
    heap = [*runs, *void, *faults]
    heapq.heapify(heap)
    expected = sorted([*runs, *faults])

    def fault(rep: Any, kind: int, t: float) -> list[int]:
        log.append(("fail" if kind == pure.FAIL else "repair", rep.serial, t))
        return [11] if kind == pure.FAIL else []

    def land(i: int, t: float) -> None:
        log.append(("land", i, t))

    def dispatch(i: int, t: float) -> None:
        log.append(("retry" if i == 11 else "encoded", i, t))

    def embedded(i: int, t: float) -> None:
        log.append(("embedded", i, t))

    pure._events(flat, heap, 1.5, fault, land, dispatch, embedded)
    assert heap == [(2.0, pure.REPAIR, 3)]  # after `until`: left for later
    pure._events(flat, heap, math.inf, fault, land, dispatch, embedded)
    names = {-1: "land", pure.FAIL: "fail", pure.REPAIR: "repair", pure.ENCODED: "encoded", pure.EMBEDDED: "embedded"}
    want: list[tuple[str, int, float]] = []
    for t, kind, rid in expected:
        if kind >= 0:
            want.append(("run", rid, t))
        else:
            want.append((names[kind], rid if kind in (pure.FAIL, pure.REPAIR) else -1 - rid, t))
            if kind == pure.FAIL:
                want.append(("retry", 11, t))
    assert log == want
    assert log == [("embedded", 9, 0.2), ("run", 2, 0.5), ("encoded", 8, 1.0), ("fail", 3, 1.0), ("retry", 11, 1.0),
                   ("land", 7, 1.0), ("run", 1, 1.0), ("run", 4, 1.0), ("run", 0, 1.0), ("repair", 3, 2.0)]
    assert not heap
