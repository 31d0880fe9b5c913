"""The replay against a reference that steps one pass at a time: the same requests get the same latencies, and a
fit on the first half of the reference's output in time predicts the six latency figures of the second half.

The reference is written from the scheduling rules in replay/replica/schedule.py's docstring (decode-first chunked
prefill, first come first served, admission at pass boundaries, or a pass later under asynchronous scheduling)
and shares only the pass time of costmodel.StepModel with the replay. The replay jumps from event to event and
sums runs of passes in closed form; the reference loops over every pass, so a wrong closed form, a missed run end
or a late admission shows up request by request.
"""

from __future__ import annotations

import dataclasses
from collections import deque
from dataclasses import dataclass

import numpy as np
import polars as pl
import pytest
import yaml

from pool_registry import Model, Registry
from replay import Candidate, calibrate, calibrated_candidate, load_candidate_text, run_replay
from replay.costmodel import step_model
from replay.fleet import PoolSpec, resolve_pools
from tests.replay_fleets import chip, fleet, pool

# every step term on: two-way tensor parallelism (collectives), engine time per step and per sequence,
# decode at its own share of peak FLOP/s and attention that grows with context
MODEL = Model(id="m", total_params_b=8.0, active_params_b=8.0, bytes_per_param=2.0, layers=32, kv_heads=8,
              head_dim=128, max_context=1_000_000, hidden_size=4096, attention_heads=32)
TRUE = {"mfu": 0.42, "mem_bw_eff": 0.71, "step_overhead_ms": 3.0, "seq_overhead_us": 40.0}


def registry(mfu: float = 0.5, eff: float = 0.5, step_ms: float = 0.0, seq_us: float = 0.0, *,
             schedule: str = "decode_first", pp: int = 1, serial: float = 0.0, ahead: bool = False) -> Registry:
    """One pool of one two-device replica (two TP ranks, or two pipeline stages), at most 16 sequences, 2,048
    tokens a pass."""
    p = pool("p", dpr=2, concurrency=16, mfu=mfu, eff=eff)
    assert p.serving is not None
    serving = dataclasses.replace(p.serving, max_num_batched_tokens=2048, step_overhead_ms=step_ms,
                                  seq_overhead_us=seq_us, schedule=schedule, pp=pp, async_scheduling=ahead)
    cost = dataclasses.replace(p.cost_model, mfu_decode=0.8 * mfu, collective_us=6.0, serial_share=serial)
    return fleet(dataclasses.replace(p, serving=serving, cost_model=cost), chips=(chip(link_gbps=300.0),),
                 models=(MODEL,))


def spec_of(reg: Registry) -> PoolSpec:
    return resolve_pools(reg, Candidate(name="c"))[0]


@dataclass
class Seq:
    """A request on the reference replica."""

    i: int
    arrival: float
    prompt: int
    out: int
    rem: int            # prompt tokens still to compute
    decoded: int = 0    # passes that decoded a token for it
    first: float = -1.0


def reference(arrival_s: list[float], ins: list[int], outs: list[int], spec: PoolSpec) -> tuple[list[float],
                                                                                            list[float]]:
    """TTFT and e2e of each request on one replica, one pass at a time."""
    step = step_model(spec)
    budget, most = spec.max_num_batched_tokens, spec.max_concurrency
    order = sorted(range(len(ins)), key=lambda k: (arrival_s[k], k))
    waiting: deque[Seq] = deque()
    running: list[Seq] = []
    ttft, e2e = [0.0] * len(ins), [0.0] * len(ins)
    t, nxt, done = 0.0, 0, 0
    began = -1.0  # when the last pass began: under asynchronous scheduling the next was composed then
    while done < len(ins):
        if not running and not waiting:
            t = max(t, arrival_s[order[nxt]])
        while nxt < len(order) and arrival_s[order[nxt]] <= t:
            k = order[nxt]
            waiting.append(Seq(k, arrival_s[k], ins[k], outs[k], ins[k]))
            nxt += 1
        first = spec.schedule == "prefill_first"  # prompts run alone, with the whole budget, while any wait
        decoders = [s for s in running if s.rem == 0]
        left = budget if first else budget - len(decoders)
        chunks: list[tuple[Seq, int]] = []
        for s in running:
            if s.rem > 0 and left > 0:
                chunks.append((s, min(s.rem, left)))
                left -= chunks[-1][1]
        gate = began if spec.async_scheduling else t
        if not running and not (waiting and waiting[0].arrival <= gate):
            gate = t  # nothing composed to run: the scheduler takes what waits at once
        while waiting and len(running) < most and left > 0 and waiting[0].arrival <= gate:
            s = waiting.popleft()
            running.append(s)
            if s.rem > 0:
                chunks.append((s, min(s.rem, left)))
                left -= chunks[-1][1]
            else:
                decoders.append(s)
                left -= not first
        if first and chunks:
            decoders = []
        tokens = len(decoders) + sum(c for _, c in chunks)
        # a decoder's context holds its prompt and every token it has, the one it decodes now included: the
        # first token, which its last prompt chunk's pass gave, then one more each pass
        kv = sum(s.prompt + s.decoded + (s.prompt > 0) for s in decoders) + sum(s.prompt - s.rem for s, _ in chunks)
        context = sum(s.prompt + s.decoded + (s.prompt > 0) for s in decoders) + sum(
            c * (s.prompt - s.rem + c / 2.0) for s, c in chunks)
        began = t
        t += step.pass_seconds(len(decoders) + len(chunks), tokens, kv, len(decoders), context)
        finished = []
        for s in decoders:
            s.decoded += 1
            if s.first < 0:
                s.first = t
            if s.decoded + (s.prompt > 0) == s.out:
                finished.append(s)
        for s, c in chunks:
            s.rem -= c
            if s.rem == 0:
                s.first = t
                if s.out == 1:
                    finished.append(s)
        for s in finished:
            running.remove(s)
            ttft[s.i], e2e[s.i] = s.first - s.arrival, t - s.arrival
            done += 1
    return ttft, e2e


def trace(seed: int, n: int, rate_s: float) -> pl.DataFrame:
    """Poisson arrivals at rate_s a second, prompts of 0-3,000 tokens and outputs of 1-300."""
    rng = np.random.default_rng(seed)
    return pl.DataFrame({"arrival_ms": np.cumsum(rng.exponential(1000.0 / rate_s, n)).round().astype(np.int64),
                         "in_tokens": rng.integers(0, 3000, n), "out_tokens": rng.integers(1, 300, n)})


def replayed(traffic: pl.DataFrame, reg: Registry, candidate: Candidate | None = None) -> pl.DataFrame:
    return run_replay(candidate or Candidate(name="c", policy="cost_min"), traffic, reg, 0).requests


@pytest.mark.parametrize("seed,rate,schedule,pp,serial,ahead", [
    (1, 2.0, "decode_first", 1, 0.0, False), (2, 6.0, "decode_first", 1, 0.0, False),
    (3, 20.0, "decode_first", 1, 0.0, False), (4, 6.0, "prefill_first", 1, 0.0, False),
    (5, 20.0, "prefill_first", 1, 0.0, False), (6, 6.0, "decode_first", 2, 0.0, False),
    (7, 20.0, "prefill_first", 2, 0.0, False), (8, 6.0, "decode_first", 1, 0.4, False),
    (9, 20.0, "decode_first", 2, 0.4, False), (10, 6.0, "prefill_first", 1, 1.0, False),
    (11, 2.0, "decode_first", 1, 0.0, True), (12, 6.0, "decode_first", 1, 0.0, True),
    (13, 20.0, "decode_first", 1, 0.0, True), (14, 6.0, "prefill_first", 1, 0.0, True),
    (15, 20.0, "prefill_first", 2, 0.4, True)])
def test_the_replay_gives_each_request_the_latencies_of_a_pass_by_pass_loop(seed: int, rate: float, schedule: str,
                                                                            pp: int, serial: float,
                                                                            ahead: bool) -> None:
    """At light, busy and overloaded rates (the queue then grows for the whole trace), with every step term on,
    on both schedules, with two pipeline stages, with memory and compute partly or not at all overlapped, and
    with each pass composed while the one before it runs (asynchronous scheduling)."""
    reg = registry(TRUE["mfu"], TRUE["mem_bw_eff"], TRUE["step_overhead_ms"], TRUE["seq_overhead_us"],
                   schedule=schedule, pp=pp, serial=serial, ahead=ahead)
    traffic = trace(seed, 400, rate)
    rows = replayed(traffic, reg)
    ttft, e2e = reference((traffic["arrival_ms"] / 1000.0).to_list(), traffic["in_tokens"].to_list(),
                          traffic["out_tokens"].to_list(), spec_of(reg))
    assert rows["ttft_s"].to_list() == pytest.approx(ttft, rel=1e-9, abs=1e-9)
    assert rows["e2e_s"].to_list() == pytest.approx(e2e, rel=1e-9, abs=1e-9)
    assert max(rows["wait_s"].to_list()) > (5.0 if rate > 10 else 0.0)  # the overloaded case does queue


def halves(seed: int = 7) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """What the reference observed at TRUE over an hour of rising load (2, then 5 requests a second), with 3 %
    lognormal measurement noise; split at the half hour into the first half and the second."""
    rng = np.random.default_rng(seed)
    first, second = trace(seed, 3600, 2.0), trace(seed + 1, 9000, 5.0)
    traffic = pl.concat([first.filter(pl.col("arrival_ms") < 1_800_000),
                         second.filter(pl.col("arrival_ms") < 1_800_000).with_columns(
                             pl.col("arrival_ms") + 1_800_000)])
    ttft, e2e = reference((traffic["arrival_ms"] / 1000.0).to_list(), traffic["in_tokens"].to_list(),
                          traffic["out_tokens"].to_list(), spec_of(registry(
                              TRUE["mfu"], TRUE["mem_bw_eff"], TRUE["step_overhead_ms"], TRUE["seq_overhead_us"])))
    noise = rng.lognormal(0.0, 0.03, (2, traffic.height))
    seen = traffic.with_columns(pl.lit("p").alias("obs_pool"), pl.Series("obs_ttft_s", np.array(ttft) * noise[0]),
                                pl.Series("obs_e2e_s", np.array(ttft) * noise[0]
                                          + (np.array(e2e) - np.array(ttft)) * noise[1]))
    late = pl.col("arrival_ms") >= 1_800_000
    return seen.filter(~late), seen.filter(late), traffic.filter(late)


def figures(ttft: np.ndarray, e2e: np.ndarray, out: np.ndarray) -> dict[str, float]:
    """p50 and p99 of TTFT, TPOT (over requests of two tokens or more) and e2e, as `vllm bench serve` gives them."""
    tpot = ((e2e - ttft) / np.maximum(out - 1, 1))[out > 1]
    return {f"{name} p{q}": float(np.percentile(v, q)) for name, v in (("ttft", ttft), ("tpot", tpot), ("e2e", e2e))
            for q in (50, 99)}


@pytest.mark.slow
def test_a_fit_on_the_first_half_gives_the_second_halfs_six_latency_figures() -> None:
    """Issue 19's check against another simulator's per-request output: calibrated on the first half hour in time
    (2 requests a second), the replay of the second (5 a second, so batches twice as large) has each of the
    six figures within 10 % of the reference's; with the registry's coefficients some are far off."""
    early, late, late_traffic = halves()
    reg = registry()  # the registry's 0.5 / 0.5, no engine time: what calibration has to correct
    fits, unknown = calibrate(early, reg)
    assert unknown == {}
    fitted = load_candidate_text(yaml.safe_dump(calibrated_candidate(fits)), reg)
    seen = figures(late["obs_ttft_s"].to_numpy(), late["obs_e2e_s"].to_numpy(), late["out_tokens"].to_numpy())
    out = late_traffic["out_tokens"].to_numpy()

    def off(candidate: Candidate) -> dict[str, float]:
        rows = replayed(late_traffic.with_columns(pl.lit("p").alias("obs_pool")), reg, candidate)
        got = figures(rows["ttft_s"].to_numpy(), rows["e2e_s"].to_numpy(), out)
        return {k: got[k] / seen[k] - 1.0 for k in seen}

    calibrated = off(fitted)
    assert max(abs(e) for e in calibrated.values()) <= 0.10, calibrated
    assert max(abs(e) for e in off(Candidate(name="registry", policy="observed")).values()) > 0.25
