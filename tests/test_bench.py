"""The closed-loop benchmark and KV admission: what `replay bench` and a pool's KV cache do at concurrency."""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
import re
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import polars as pl
import pytest

import replay.bench
from app.cli import main
from pool_registry import Registry
from replay import Candidate, closed_loop, run_replay
from replay.bench import concurrency_levels, random_lengths, service_seconds
from replay.costmodel import step_model
from replay.exceptions import ReplayError
from replay.fleet import PoolSpec, resolve_pools
from replay.replica import Replica
from tests.replay_fleets import fleet, pool

LLAMA_FP8 = "llama-3.1-70b"


def h100_pool(fleet: Registry, dpr: int) -> Registry:
    """One replica of `dpr` H100s serving llama 70B with fp8 weights, max_concurrency 64."""
    import dataclasses
    llama = dataclasses.replace(fleet.model(LLAMA_FP8), bytes_per_param=1.0)
    return Registry("t", (fleet.chip("h100-sxm"),), (llama,), (
        pool("p", chip_id="h100-sxm", model_id=LLAMA_FP8, dpr=dpr, concurrency=64, mfu=0.45, eff=0.75),))


def one_prefill_ms(isl: int, dpr: int = 8, prompts: int = 1) -> float:
    """`prompts` llama 70B prompts in one pass on `dpr` H100s, by hand: a compute-bound pass of the weights' FLOPs,
    attention over each causal context (isl x isl / 2 products) and two ring all-reduces a layer over 450 GB/s
    NVLink, whose 2(dpr - 1) hops of 2.13 us each (examples/fleet.yaml) the pass pays once, however many tokens."""
    flops = 989e12 * 0.45 * dpr
    weights = isl * 2 * 70.6e9 / flops
    attention = 4 * 80 * 64 * 128 * (isl * isl / 2) / flops
    all_reduce = 80 * 2 * 2 * (dpr - 1) / dpr * 8192 * 2 * isl / 450e9
    hops = 80 * 2 * 2 * (dpr - 1) * 2.13e-6
    return (prompts * (weights + attention + all_reduce) + hops) * 1000


def most_running(rows: pl.DataFrame) -> int:
    """The most requests admitted and unfinished at one moment."""
    start = (rows["arrival_ms"] / 1000 + rows["wait_s"]).to_numpy()
    end = (rows["arrival_ms"] / 1000 + rows["e2e_s"]).to_numpy()
    times = np.concatenate([start, end])
    steps = np.concatenate([np.ones_like(start), -np.ones_like(end)])
    order = np.lexsort((steps, times))  # ends before starts at the same instant
    return int(np.cumsum(steps[order]).max())


@pytest.mark.parametrize(("dpr", "most"), [(2, 27), (8, 64)])
def test_a_70b_fp8_model_queues_8k_prompts_for_kv_on_2_devices_not_on_8(fleet: Registry, dpr: int,
                                                                       most: int) -> None:
    # 2 x 80 GB x 0.9 = 144 GB, less 70.6 GB of fp8 weights, holds 223,999 tokens of KV (327,680 B each):
    # admission reserves each 8192-token prompt, so 27 run at once and the rest queue for KV. 8 devices hold
    # 1.54M tokens: all 64 run at once.
    reg = h100_pool(fleet, dpr)
    spec = resolve_pools(reg, Candidate(name="t"))[0]
    assert spec.kv_capacity_tokens == int((dpr * 80e9 * 0.9 - 70.6e9) // 327_680)
    traffic = pl.DataFrame({"arrival_ms": [0] * 64, "in_tokens": 8192, "out_tokens": 256})
    result = run_replay(Candidate(name="c", policy="cost_min"), traffic, reg, 0)
    assert most_running(result.requests) == most
    assert result.summary.served == 64
    if dpr == 2:  # the running prompts' decoding outgrows the cache: the newest are preempted and recomputed
        assert result.summary.preempted > 0 and result.summary.kv_use["p"] > 0.5
        # the cache runs full: its peak is its capacity, less than a token a sequence short, and most of the
        # busy time holds more than 90 % of it
        p = result.summary.pools["p"]
        assert p.kv_peak == pytest.approx(1.0, abs=28 / spec.kv_capacity_tokens) and p.kv_p95 >= 0.9
    else:
        assert result.summary.preempted == 0


def test_tpot_grows_with_concurrency_and_throughput_with_it(fleet: Registry) -> None:
    spec = resolve_pools(h100_pool(fleet, 8), Candidate(name="t"))[0]
    points = [closed_loop(spec, c, 1024, 128, 200) for c in (1, 8, 32, 64)]
    tpot = [p.tpot_ms_p50 for p in points]
    assert all(t is not None for t in tpot)
    assert tpot == sorted(tpot) and tpot[-1] > 1.5 * tpot[0]  # type: ignore[operator]
    assert [p.output_tok_s for p in points] == sorted(p.output_tok_s for p in points)
    # one client alone: prefill is one compute-bound pass (40.6 ms of the weights' FLOPs, 0.4 ms of attention,
    # 10.4 ms of all-reduces' bytes and 4.8 ms of their hops), each token one memory-bound pass
    alone = points[0]
    assert alone.ttft_ms_p50 == pytest.approx(one_prefill_ms(1024), rel=1e-6)
    assert alone.req_s == pytest.approx(1000 / (alone.ttft_ms_p50 + 127 * alone.tpot_ms_p50), rel=1e-6)


def test_a_request_larger_than_the_cache_is_refused(fleet: Registry) -> None:
    spec = resolve_pools(h100_pool(fleet, 2), Candidate(name="t"))[0]
    with pytest.raises(ReplayError, match="does not fit the replica's KV cache of 223999 tokens"):
        closed_loop(spec, 1, 300_000, 10, 5)


def test_the_bench_command_prints_and_emits_json(capsys: pytest.CaptureFixture[str], fleet_db: Path) -> None:
    code = main(["--db", str(fleet_db), "--json", "replay", "bench", "--pool", "h100-a", "--concurrency", "1,16",
                 "--isl", "512", "--osl", "64", "--requests", "50"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and [p["concurrency"] for p in out] == [1, 16]
    assert set(out[0]) == {"concurrency", "ttft_ms_p50", "ttft_ms_p99", "tpot_ms_p50", "tpot_ms_p99",
                           "output_tok_s", "req_s", "ttft_ms_mean", "tpot_ms_mean", "e2el_ms_mean", "e2el_ms_p50",
                           "e2el_ms_p99", "requests", "duration_s", "peak_concurrency", "notes"}
    assert [p["requests"] for p in out] == [50, 50]
    assert out[1]["tpot_ms_p50"] > out[0]["tpot_ms_p50"]
    assert main(["--db", str(fleet_db), "replay", "bench", "--pool", "h100-a", "--concurrency", "4",
                 "--isl", "512", "--osl", "64"]) == 0
    text = capsys.readouterr().out
    assert "concurrency" in text and "output tok/s" in text and "(pp 1; decode first)" in text
    ahead = fleet_db.parent / "ahead.yaml"
    ahead.write_text("name: ahead\npolicy: sla_cost\npools: {h100-a: {async_scheduling: true}}\n")
    assert main(["--db", str(fleet_db), "replay", "bench", "--pool", "h100-a", "--concurrency", "4", "--isl", "512",
                 "--osl", "64", "--candidate", str(ahead)]) == 0
    assert "(pp 1; decode first, passes composed ahead)" in capsys.readouterr().out
    assert main(["--db", str(fleet_db), "replay", "bench", "--pool", "nope", "--concurrency", "4",
                 "--isl", "512", "--osl", "64"]) == 2
    assert "unknown pool 'nope'; replayable: h100-a" in capsys.readouterr().err


# -- the closed loop, by hand -----------------------------------------------------------------------------------
# The small pool of tests/replay_fleets: 2e10 B of weights read at 2e12 B/s make a decode pass 0.01 s (plus KV),
# and a 512-token prompt 512 x 4e-5 = 0.02048 s of compute: prefill passes are compute-bound, decode passes
# memory-bound, and every pass is the step model's pass_seconds(seqs, tokens, KV tokens read).
P, OSL = 512, 5


def small_pool() -> PoolSpec:
    return resolve_pools(fleet(pool("a", concurrency=4)), Candidate(name="t"))[0]


def stats(ttft: list[float], e2e: list[float], outs: list[int]) -> dict[str, float]:
    """What the bench reports of per-request times in s, as vLLM computes it."""
    t, e = np.array(ttft) * 1000, np.array(e2e) * 1000
    tpot = (e - t) / (np.array(outs) - 1)
    return {"ttft_ms_p50": float(np.percentile(t, 50)), "ttft_ms_p99": float(np.percentile(t, 99)),
            "ttft_ms_mean": float(t.mean()), "tpot_ms_p50": float(np.percentile(tpot, 50)),
            "tpot_ms_p99": float(np.percentile(tpot, 99)), "tpot_ms_mean": float(tpot.mean()),
            "e2el_ms_p50": float(np.percentile(e, 50)), "e2el_ms_p99": float(np.percentile(e, 99))}


def assert_point(point: replay.bench.BenchPoint, expected: dict[str, float]) -> None:
    for key, value in expected.items():
        assert getattr(point, key) == pytest.approx(value, rel=1e-9), key


def test_one_client_runs_each_request_alone_back_to_back() -> None:
    spec = small_pool()
    step = step_model(spec)
    prefill = step.pass_seconds(1, P, 0)                                   # the prompt, and the first token
    decode = [step.pass_seconds(1, 1, P + m) for m in range(1, OSL)]       # token m + 1 reads P + m of KV
    e2e = prefill + sum(decode)
    point = closed_loop(spec, 1, P, OSL, 3)
    assert_point(point, {**stats([prefill] * 3, [e2e] * 3, [OSL] * 3), "duration_s": 3 * e2e,
                         "output_tok_s": 3 * OSL / (3 * e2e), "req_s": 3 / (3 * e2e)})
    assert point.tpot_ms_p50 == pytest.approx(sum(decode) / (OSL - 1) * 1000, rel=1e-9)
    assert (point.requests, point.peak_concurrency) == (3, 1)


def test_two_clients_by_hand_the_second_starting_half_a_service_time_later() -> None:
    spec = small_pool()
    pass_s = step_model(spec).pass_seconds
    # One request's expected service at concurrency 2 (clients spread evenly): 5 passes, 2 of which compute a
    # prompt next to the other client's decode token, all reading the KV of 2 sequences at half their output.
    kv = 2 * (P + OSL / 2)
    service = 2 * pass_s(2, P + 1, kv) + 3 * pass_s(2, 2, kv)
    assert service_seconds(spec, 2, P, OSL) == pytest.approx(service, rel=1e-12)
    s1 = service / 2
    # (seqs, tokens, KV read) of each pass; r0..r3 are the requests, r0 and r2 client 0's, r1 and r3 client 1's.
    # A request sent on a completion reaches the engine an instant after its next pass was scheduled, so it
    # waits for that pass to end, as a request sent during a pass does.
    passes = [(1, P, 0),              # 1: r0's prompt -> r0's first token
              (1, 1, P + 1),          # 2: r0 decodes
              (1, 1, P + 2),          # 3: r0 decodes; r1 is sent during it (at s1) and waits for its end
              (2, P + 1, P + 3),      # 4: r0 decodes, r1's prompt -> r1's first token
              (2, 2, 2 * P + 5),      # 5: both decode; r0 has its 5 tokens: client 0 sends r2
              (1, 1, P + 2),          # 6: r1 decodes alone, r2 waiting for the pass to end
              (2, P + 1, P + 3),      # 7: r1 decodes, r2's prompt
              (2, 2, 2 * P + 5),      # 8: r1 done: client 1 sends r3
              (1, 1, P + 2),          # 9: r2 decodes alone
              (2, P + 1, P + 3),      # 10: r2 decodes, r3's prompt
              (2, 2, 2 * P + 5),      # 11: r2 done; no requests left to send
              (1, 1, P + 2), (1, 1, P + 3), (1, 1, P + 4)]  # 12-14: r3 alone; done at the end of pass 14
    t = np.concatenate([[0.0], np.cumsum([pass_s(*p) for p in passes])])  # t[k]: end of pass k
    assert t[2] < s1 < t[3]
    sent = [0.0, s1, t[5], t[8]]
    first = [t[1], t[4], t[7], t[10]]
    done = [t[5], t[8], t[11], t[14]]
    point = closed_loop(spec, 2, P, OSL, 4)
    ttft = [f - s for f, s in zip(first, sent, strict=True)]
    e2e = [d - s for d, s in zip(done, sent, strict=True)]
    assert_point(point, {**stats(ttft, e2e, [OSL] * 4), "duration_s": t[14], "output_tok_s": 4 * OSL / t[14],
                         "req_s": 4 / t[14]})
    assert (point.requests, point.peak_concurrency) == (4, 2)


def traced(spec: PoolSpec, passes: list[tuple[int, int, int]], *, sent: list[int | str], first: list[int],
           done: list[int]) -> None:
    """Two clients' four requests in the closed loop against a trace by hand: `passes` as (sequences, tokens, KV
    read), and when each request was sent, got its first token and completed as the pass that ended then ("s1":
    half a service time in, during pass 3, when the second client starts)."""
    t = np.concatenate([[0.0], np.cumsum([step_model(spec).pass_seconds(*p) for p in passes])])
    s1 = service_seconds(spec, 2, P, OSL) / 2
    assert t[2] < s1 < t[3]
    at = [s1 if k == "s1" else float(t[int(k)]) for k in sent]
    ttft = [t[f] - s for f, s in zip(first, at, strict=True)]
    e2e = [t[d] - s for d, s in zip(done, at, strict=True)]
    point = closed_loop(spec, 2, P, OSL, 4)
    assert_point(point, {**stats(ttft, e2e, [OSL] * 4), "duration_s": t[done[-1]]})
    assert (point.requests, point.peak_concurrency) == (4, 2)


def test_two_clients_by_hand_under_asynchronous_scheduling() -> None:
    # the engine composes each pass as the one before it begins (async_scheduling), so a request that reaches it
    # during a pass joins the pass after next: every request but the first waits a decode pass more than above
    spec = dataclasses.replace(small_pool(), async_scheduling=True)
    passes = [(1, P, 0),              # 1: r0's prompt -> r0's first token (the replica was idle: no wait)
              (1, 1, P + 1),          # 2: r0 decodes
              (1, 1, P + 2),          # 3: r0 decodes; r1 is sent during it
              (1, 1, P + 3),          # 4: r0 alone, as composed when pass 3 began
              (2, P + 1, P + 4),      # 5: r0's last token, r1's prompt -> r1's first token; client 0 sends r2
              (1, 1, P + 1),          # 6: r1 decodes; pass 7 was composed as it began
              (1, 1, P + 2),          # 7: r1 decodes
              (2, P + 1, P + 3),      # 8: r1 decodes, r2's prompt
              (2, 2, 2 * P + 5),      # 9: r1 done (reads P + 4, r2 P + 1): client 1 sends r3
              (1, 1, P + 2),          # 10: r2 decodes alone
              (1, 1, P + 3),          # 11
              (2, P + 1, P + 4),      # 12: r2's last token, r3's prompt
              (1, 1, P + 1), (1, 1, P + 2), (1, 1, P + 3), (1, 1, P + 4)]  # 13-16: r3 alone
    traced(spec, passes, sent=[0, "s1", 5, 9], first=[1, 5, 8, 12], done=[5, 9, 12, 16])


def test_two_clients_by_hand_when_prompts_run_first() -> None:
    # schedule prefill_first (SGLang): a waiting prompt runs in a pass of its own and the decoders wait for it,
    # where decode-first (the test above) computes it next to their tokens
    spec = dataclasses.replace(small_pool(), schedule="prefill_first")
    passes = [(1, P, 0),              # 1: r0's prompt -> r0's first token
              (1, 1, P + 1),          # 2: r0 decodes
              (1, 1, P + 2),          # 3: r0 decodes; r1 is sent during it and waits for its end
              (1, P, 0),              # 4: r1's prompt alone: r0 waits
              (2, 2, 2 * P + 4),      # 5: both decode (r0 reads P + 3, r1 P + 1)
              (2, 2, 2 * P + 6),      # 6: r0 has its 5 tokens: client 0 sends r2
              (1, 1, P + 3),          # 7: r1 decodes alone, r2 waiting for the pass to end
              (1, P, 0),              # 8: r2's prompt alone
              (2, 2, 2 * P + 5),      # 9: r1 done (reads P + 4, r2 P + 1): client 1 sends r3
              (1, 1, P + 2),          # 10: r2 decodes alone
              (1, P, 0),              # 11: r3's prompt alone
              (2, 2, 2 * P + 4),      # 12
              (2, 2, 2 * P + 6),      # 13: r2 done; no requests left to send
              (1, 1, P + 3), (1, 1, P + 4)]  # 14-15: r3 alone
    traced(spec, passes, sent=[0, "s1", 6, 9], first=[1, 4, 8, 11], done=[6, 9, 13, 15])


def test_prompts_first_keeps_a_lockstep_wave_together(fleet: Registry) -> None:
    # 16 clients at once, 1024-token prompts, 8192 tokens a pass: every wave's prompts take two passes of 8, the
    # decoders wait for both, all 16 then decode in the same passes and finish together, so each wave arrives as
    # one again: half of every wave waits one pass of 8 prompts, half two. Decode-first breaks the wave: the first
    # 8 decode beside the second 8's prompts, finish a pass earlier and come back as a wave of their own.
    spec = dataclasses.replace(resolve_pools(h100_pool(fleet, 8), Candidate(name="t"))[0], schedule="prefill_first")
    one_pass = one_prefill_ms(1024, prompts=8) + spec.step_overhead_ms
    point = closed_loop(spec, 16, 1024, 256, 64, arrivals="lockstep")
    assert point.ttft_ms_p50 == pytest.approx(1.5 * one_pass, rel=1e-6)
    assert point.ttft_ms_p99 == pytest.approx(2 * one_pass, rel=1e-6)
    assert point.peak_concurrency == 16
    vllm = closed_loop(dataclasses.replace(spec, schedule="decode_first"), 16, 1024, 256, 64, arrivals="lockstep")
    assert vllm.ttft_ms_p50 < point.ttft_ms_p50


def test_ttft_grows_smoothly_with_concurrency_not_in_waves(fleet: Registry) -> None:
    # the shape: a TP8 H100 pool serving llama 70B, 1024 in, 256 out. In lockstep every wave of c
    # prompts was prefilled as one batch: TTFT p50 was c one-request prefills up to c = 8 and then fell.
    spec = resolve_pools(h100_pool(fleet, 8), Candidate(name="t"))[0]
    step = step_model(spec)
    levels = (1, 2, 4, 8, 16, 32, 64)
    ttft = [closed_loop(spec, c, 1024, 256, replay.bench.default_requests(c)).ttft_ms_p50 for c in levels]
    assert all(a < b for a, b in itertools.pairwise(ttft))
    # with the clients spread over the 256 passes of a request, each prompt is computed next to the others'
    # decode tokens, never beside another client's prompt; sent on a completion, it reaches the engine once the
    # next pass was scheduled and waits for it: TTFT is that decode pass of the c - 1 others and the prompt's
    # pass beside them (their KV at half their output on average), and a lone client's is one prefill
    assert ttft[0] == pytest.approx(one_prefill_ms(1024), rel=1e-6)
    for c, got in zip(levels[1:], ttft[1:], strict=True):
        kv = (c - 1) * (1024 + 128)
        by_hand = step.pass_seconds(c - 1, c - 1, kv) + step.pass_seconds(c, 1024 + c - 1, kv)
        assert got == pytest.approx(by_hand * 1000, rel=0.01), c
    assert ttft[-1] < 1.3 * ttft[0]


def test_lockstep_clients_prefill_each_wave_as_one_batch(fleet: Registry) -> None:
    # All clients start at once with fixed lengths: every wave finishes in the same pass and the next wave's c
    # prompts are computed in one compute-bound pass, so every request waits for c prompts: TTFT = c prefills
    # (56.2, 107.6, 210.5, 416.3 ms, the hops paid once a pass; 40.6, 81.2, 162.4, 324.9 before the model's shape
    # priced attention and the all-reduces), while staggered clients see about one.
    spec = resolve_pools(h100_pool(fleet, 8), Candidate(name="t"))[0]
    one = one_prefill_ms(1024)
    overhead = spec.step_overhead_ms
    for c in (1, 2, 4, 8):
        point = closed_loop(spec, c, 1024, 256, replay.bench.default_requests(c), arrivals="lockstep")
        assert point.ttft_ms_p50 == pytest.approx(one_prefill_ms(1024, prompts=c) + overhead, rel=1e-6)
        assert point.ttft_ms_p99 == pytest.approx(point.ttft_ms_p50, rel=1e-9)  # every wave alike
    spread = closed_loop(spec, 8, 1024, 256, replay.bench.default_requests(8))
    assert spread.ttft_ms_p50 < 0.2 * (8 * one)
    with pytest.raises(ReplayError, match="unknown arrivals 'burst'; known: staggered, lockstep"):
        closed_loop(spec, 2, 16, 4, 4, arrivals="burst")


# -- random lengths --------------------------------------------------------------------------------------------
def test_random_lengths_as_vllms_random_dataset() -> None:
    ins, outs = random_lengths(1024, 256, 20_000, range_ratio=0.25, seed=3)
    assert (ins.min(), ins.max(), outs.min(), outs.max()) == (768, 1280, 192, 320)
    assert ins.mean() == pytest.approx(1024, rel=0.01) and outs.mean() == pytest.approx(256, rel=0.01)
    # one numpy Generator seeded with the seed: all prompt lengths first, then all output lengths
    rng = np.random.default_rng(3)
    assert ins.tolist() == rng.integers(768, 1281, size=20_000).tolist()
    assert outs.tolist() == rng.integers(192, 321, size=20_000).tolist()
    # floor below, ceil above; at least one output token
    ins, outs = random_lengths(10, 1, 5_000, range_ratio=0.25, seed=0)
    assert (ins.min(), ins.max(), outs.min(), outs.max()) == (7, 13, 1, 2)
    ins, outs = random_lengths(1024, 256, 100)
    assert set(ins.tolist()) == {1024} and set(outs.tolist()) == {256}
    again = random_lengths(1024, 256, 100, range_ratio=0.5, seed=7)
    assert [a.tolist() for a in again] == [a.tolist() for a in random_lengths(1024, 256, 100, range_ratio=0.5,
                                                                                seed=7)]
    assert again[0].tolist() != random_lengths(1024, 256, 100, range_ratio=0.5, seed=8)[0].tolist()


def test_random_lengths_up_to_the_lengths_as_sglangs_bench_serving() -> None:
    # SGLang's client reads R as the shortest share of the length: uniform in [floor(L R), L], at least 1
    ins, outs = random_lengths(1024, 1024, 20_000, range_ratio=0.8, seed=3, style="up_to")
    assert (ins.min(), ins.max(), outs.min(), outs.max()) == (819, 1024, 819, 1024)
    assert ins.mean() == pytest.approx((819 + 1024) / 2, rel=0.005)  # 0.9 L on average, not L
    rng = np.random.default_rng(3)
    assert ins.tolist() == rng.integers(819, 1025, size=20_000).tolist()
    assert outs.tolist() == rng.integers(819, 1025, size=20_000).tolist()
    ins, outs = random_lengths(1024, 256, 100, range_ratio=1.0, style="up_to")  # R = 1: fixed lengths
    assert set(ins.tolist()) == {1024} and set(outs.tolist()) == {256}
    ins, outs = random_lengths(10, 3, 5_000, range_ratio=0.0, seed=1, style="up_to")  # SGLang's default R = 0
    assert (ins.min(), ins.max(), outs.min(), outs.max()) == (1, 10, 1, 3)
    assert replay.bench.mean_lengths(1024, 1024, 0.8, "up_to") == (922, 922)
    assert replay.bench.mean_lengths(1024, 256, 0.3, "around") == (1024, 256)
    assert replay.bench.fixed_lengths(1.0, "up_to") and replay.bench.fixed_lengths(0.0, "around")
    assert not replay.bench.fixed_lengths(0.0, "up_to") and not replay.bench.fixed_lengths(0.8, "up_to")


def test_clients_that_start_together_with_drawn_lengths_drift_out_of_their_waves(fleet: Registry) -> None:
    # Every client starting at once (a client with an unbounded request rate) with fixed lengths stays in waves:
    # every TTFT is a wave's prefill, 8 prompts a pass at the 8192-token budget. With lengths drawn up to 0.8 of
    # them the clients finish apart and drift out of the waves: past the first, most prompts are computed beside
    # decoders and the median TTFT falls toward one prefill, while the first wave (all sent at 0) still pays a
    # batched one, which the p99 keeps. The more clients, the longer the drift takes and the more prompts meet:
    # with 10 requests a client the median grows with concurrency, where spread-out clients see one prefill.
    spec = resolve_pools(h100_pool(fleet, 8), Candidate(name="t"))[0]
    one = one_prefill_ms(1024)
    waves = closed_loop(spec, 16, 1024, 256, 160, arrivals="lockstep")
    drift = closed_loop(spec, 16, 1024, 256, 160, arrivals="lockstep", range_ratio=0.8, range_style="up_to")
    assert waves.ttft_ms_p50 > 6 * one
    assert 0.8 * one < drift.ttft_ms_p50 < 0.5 * waves.ttft_ms_p50
    assert drift.ttft_ms_p99 > 4 * drift.ttft_ms_p50
    as_run = [closed_loop(spec, c, 1024, 256, 10 * c, arrivals="lockstep", range_ratio=0.8,
                          range_style="up_to").ttft_ms_p50 for c in (4, 64)]
    spread = [closed_loop(spec, c, 1024, 256, 10 * c).ttft_ms_p50 for c in (4, 64)]
    assert as_run[1] > 1.5 * as_run[0] and spread[1] < 1.1 * spread[0]
    # the client's bounds are checked in its own reading: R = 1 is SGLang's fixed lengths, vLLM's refuses it
    fixed = closed_loop(spec, 16, 1024, 256, 160, arrivals="lockstep", range_ratio=1.0, range_style="up_to")
    assert fixed == waves
    with pytest.raises(ReplayError, match=re.escape("bench needs a random range ratio in [0, 1] up to the "
                                                    "lengths, got 1.5")):
        closed_loop(spec, 2, 16, 4, 4, range_ratio=1.5, range_style="up_to")
    with pytest.raises(ReplayError, match=re.escape("bench needs a range style around or up_to, got 'below'")):
        closed_loop(spec, 2, 16, 4, 4, range_style="below")


def test_the_bench_with_random_lengths_is_reproducible(fleet: Registry) -> None:
    spec = resolve_pools(h100_pool(fleet, 8), Candidate(name="t"))[0]
    fixed = closed_loop(spec, 8, 1024, 128, 200)
    assert closed_loop(spec, 8, 1024, 128, 200, range_ratio=0.0, seed=5) == fixed  # R = 0: the seed is unused
    drawn = closed_loop(spec, 8, 1024, 128, 200, range_ratio=0.3, seed=5)
    assert drawn == closed_loop(spec, 8, 1024, 128, 200, range_ratio=0.3, seed=5)
    assert drawn != closed_loop(spec, 8, 1024, 128, 200, range_ratio=0.3, seed=6) and drawn != fixed
    _, outs = random_lengths(1024, 128, 200, range_ratio=0.3, seed=5)
    assert drawn.output_tok_s == pytest.approx(outs.sum() / drawn.duration_s, rel=1e-12)


# -- request-count semantics -----------------------------------------------------------------------------------
class Counting:
    """A replica that records what the clients sent and when requests completed: a wrapper, as the compiled
    Replica (replay/native.py) takes no subclasses written in Python."""

    log: ClassVar[list[tuple[float, int]]] = []  # (time, +1 sent / -1 completed)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        object.__setattr__(self, "inner", Replica(*args, **kwargs))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "on_done":  # the bench learns of completions here
            told = value

            def done(i: int, t: float) -> None:
                Counting.log.append((t, -1))
                told(i, t)
            value = done
        setattr(self.inner, name, value)

    def arrive(self, i: int, t: float) -> None:
        Counting.log.append((t, 1))
        self.inner.arrive(i, t)


@pytest.mark.parametrize(("clients", "requests", "warmups"), [(4, 10, 0), (4, 10, 3), (8, 5, 0), (3, 30, 7)])
def test_requests_are_shared_by_the_clients_with_at_most_one_outstanding_each(
        monkeypatch: pytest.MonkeyPatch, clients: int, requests: int, warmups: int) -> None:
    monkeypatch.setattr(replay.bench, "Replica", Counting)
    Counting.log = []
    point = closed_loop(small_pool(), clients, P, OSL, requests, warmups=warmups)
    log = sorted(Counting.log, key=lambda e: (e[0], e[1]))  # completions first at the same instant
    assert sum(1 for _, d in log if d == 1) == warmups + requests == sum(1 for _, d in log if d == -1)
    assert point.requests == requests
    outstanding = np.cumsum([d for _, d in log])
    assert outstanding.max() == min(clients, warmups + requests) and outstanding.min() >= 0
    assert point.peak_concurrency <= min(clients, requests)
    # but for each client's first request, every request is sent the moment another one completes (an instant
    # later: after the engine has scheduled its next pass)
    completions = {math.nextafter(t, math.inf) for t, d in log if d == -1}
    assert sum(1 for t, d in log if d == 1 and t not in completions) <= min(clients, warmups + requests)


def test_warmups_are_not_measured_and_one_wave_of_them_reaches_the_steady_state(fleet: Registry) -> None:
    spec = resolve_pools(h100_pool(fleet, 8), Candidate(name="t"))[0]
    cold = closed_loop(spec, 16, 1024, 128, 160)
    warm = closed_loop(spec, 16, 1024, 128, 160, warmups=16)
    assert (cold.requests, warm.requests) == (160, 160)
    # the first wave's prompts are sent during passes and wait for the rest of them; past it every prompt is sent
    # on a completion, waits for the whole pass that follows it and is computed in the same kind of pass, next to
    # the other 15 clients' decode tokens (whose attention over their context, a few of them a token further on,
    # moves it by a few millionths): the first wave waits less, and the warm-ups take it out of the mean
    assert warm.ttft_ms_p99 == pytest.approx(warm.ttft_ms_p50, rel=1e-5)
    assert cold.ttft_ms_mean < warm.ttft_ms_mean - 0.5
    assert warm.ttft_ms_mean == pytest.approx(warm.ttft_ms_p50, rel=1e-5)
    assert warm.ttft_ms_p50 == pytest.approx(cold.ttft_ms_p50, rel=1e-6)
    longer = closed_loop(spec, 16, 1024, 128, 160, warmups=48)
    assert (longer.ttft_ms_p50, longer.ttft_ms_p99) == pytest.approx((warm.ttft_ms_p50, warm.ttft_ms_p99), rel=1e-9)


# -- bad input -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("kwargs", "message"), [
    ({"range_ratio": 1.0}, "bench needs a random range ratio in [0, 1), got 1.0"),
    ({"range_ratio": -0.1}, "bench needs a random range ratio in [0, 1), got -0.1"),
    ({"range_ratio": math.nan}, "bench needs a random range ratio in [0, 1), got nan"),
    ({"warmups": -1}, "bench needs warmups >= 0, got -1"),
    ({"seed": -3}, "bench needs a seed >= 0, got -3"),
])
def test_bad_options_are_refused_quoting_the_value(kwargs: dict[str, float], message: str) -> None:
    with pytest.raises(ReplayError, match=f"^{re.escape(message)}$"):
        closed_loop(small_pool(), 4, P, OSL, 10, **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(("option", "value"), [("--random-range-ratio", "1.5"), ("--num-warmups", "-2")])
def test_the_bench_command_refuses_bad_options_in_one_line(capsys: pytest.CaptureFixture[str], fleet_db: Path,
                                                           option: str, value: str) -> None:
    assert main(["--db", str(fleet_db), "replay", "bench", "--pool", "h100-a", "--concurrency", "4", "--isl", "512",
                 "--osl", "64", option, value]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"got {value}" in err and err.startswith("hetpool: error: bench needs")


def test_the_bench_command_takes_vllms_options(capsys: pytest.CaptureFixture[str], fleet_db: Path) -> None:
    argv = ["--db", str(fleet_db), "replay", "bench", "--pool", "h100-a", "--concurrency", "1,8", "--isl", "512",
            "--osl", "64", "--num-warmups", "8", "--random-range-ratio", "0.2", "--seed", "4"]
    assert main(["--json", *argv, "--num-prompts", "40"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [p["requests"] for p in out] == [40, 40]
    assert main(["--json", *argv, "--requests", "40"]) == 0
    assert json.loads(capsys.readouterr().out) == out  # --requests is --num-prompts
    assert main([*argv, "--num-prompts", "40"]) == 0
    text = capsys.readouterr().out
    assert "isl 512, osl 64 (range ratio 0.2 around them, seed 4), 8 warm-ups" in text and "ttft mean" in text
    assert main([*argv[:-4], "--random-range-ratio", "0.8", "--range-style", "up_to", "--num-prompts", "40"]) == 0
    assert "isl 512, osl 64 (range ratio 0.8 up to them, seed 0)" in capsys.readouterr().out
    assert main([*argv[:-4], "--random-range-ratio", "1", "--range-style", "up_to", "--num-prompts", "40"]) == 0
    assert "isl 512, osl 64, 8 warm-ups" in capsys.readouterr().out  # SGLang's R = 1: fixed lengths
    with pytest.raises(SystemExit) as exit_:
        main(["replay", "bench", "--help"])
    helptext = capsys.readouterr().out
    assert exit_.value.code == 0
    assert "example:\n  hetpool replay bench --pool h100-a" in helptext and "--num-prompts 200" in helptext
    for option in ("--num-prompts N, --requests N", "--num-warmups N", "--random-range-ratio R", "--seed SEED"):
        assert option in helptext


@pytest.mark.parametrize("text, levels", [("1, 8,8, 64", (1, 8, 64)), ("64,1", (1, 64)), (" 4 ", (4,))])
def test_concurrency_levels_are_sorted_whole_numbers_each_once(text: str, levels: tuple[int, ...]) -> None:
    assert concurrency_levels(text) == levels


@pytest.mark.parametrize("text, message", [
    ("x", "expected whole numbers separated by commas, got 'x'"),
    ("1.5", "expected whole numbers separated by commas, got '1.5'"),
    ("0, 4", "expected whole numbers >= 1, got '0, 4'"),
    ("", "expected whole numbers >= 1, got ''"),
])
def test_concurrency_levels_refuse_what_is_not_a_level(text: str, message: str) -> None:
    with pytest.raises(ValueError) as err:
        concurrency_levels(text)
    assert str(err.value) == message


def test_a_point_gives_the_statistic_a_table_asks_for() -> None:
    point = replay.bench.BenchPoint(concurrency=4, ttft_ms_p50=50.0, ttft_ms_p99=90.0, tpot_ms_p50=9.0,
                                    tpot_ms_p99=12.0, output_tok_s=1.0, req_s=1.0, ttft_ms_mean=61.0,
                                    tpot_ms_mean=9.5)
    assert point.latency_ms("median") == (50.0, 9.0) and point.latency_ms("mean") == (61.0, 9.5)
    assert point.latency_ms("p99") == (90.0, 12.0)
    with pytest.raises(ReplayError, match="unknown statistic 'p90'; known: median, mean, p99"):
        point.latency_ms("p90")
