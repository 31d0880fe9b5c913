"""The roofline pass model, its closed-form runs, money, and the static constraints, against hand arithmetic."""

from __future__ import annotations

import dataclasses

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pool_registry import Chip, Interconnect, Model, Pool, Registry
from replay import Candidate, run_replay
from replay.constraints import feasible, fits_context, fits_memory, why_not
from replay.costmodel import (
    busy_cost,
    decode_seconds,
    full_batch_cost,
    full_batch_costs,
    kv_transfer_seconds,
    passes_within,
    prefill_seconds,
    provisioned_cost,
    run_seconds,
    step_model,
)
from replay.fleet import PoolSpec, resolve_pools
from tests.replay_fleets import chip, fleet, model, pool

ONE = Candidate(name="t", policy="cost_min")
KV = 2 * 10 * 8 * 128 * 2  # the test model's KV bytes per token: K and V x 10 layers x 8 heads x 128 x 2 B


def spec(reg: Registry, pool_id: str) -> PoolSpec:
    return {p.id: p for p in resolve_pools(reg, ONE)}[pool_id]


def test_dense_pass_times_by_hand() -> None:
    # 4 TB/s x 0.5 = 2e12 B/s: the 2e10 B of weights take 0.01 s. 1000 TFLOPS x 0.5: 2 x 10e9 / 5e14 = 4e-5 s
    # of compute per token.
    step = step_model(spec(fleet(pool("a")), "a"))
    # memory-bound: 8 decoding sequences of 1000 tokens each read 8000 x 40,960 B of KV as well
    assert step.pass_seconds(8, 8, 8000) == pytest.approx(0.01 + 8000 * KV / 2e12)
    # compute-bound: one 2048-token prompt chunk, 2048 x 4e-5 s against 0.01 s of weights
    assert step.pass_seconds(1, 2048, 0) == pytest.approx(0.08192)
    # the one-request limits are the seed's formulas
    assert prefill_seconds(1000.0, 600.0, spec(fleet(pool("a")), "a")) == pytest.approx(0.016)
    assert decode_seconds(100.0, spec(fleet(pool("a")), "a")) == pytest.approx(1.0)


def test_moe_pass_times_by_hand() -> None:
    # 100B total, 10B active: one token reads the active 2e10 B; x tokens read 2e11 x (1 - 0.9^x) B.
    moe = fleet(pool("e"), models=(model("m", params_b=100.0, active_b=10.0),))
    step = step_model(spec(moe, "e"))
    assert step.pass_seconds(1, 1, 0) == pytest.approx(0.01)
    touched = 2e11 * (1 - 0.9**8) / 2e12
    assert step.pass_seconds(8, 8, 8000) == pytest.approx(touched + 8000 * KV / 2e12)   # memory-bound
    assert step.pass_seconds(1, 256, 0) == pytest.approx(0.1, rel=1e-9)                 # all experts read
    assert step.pass_seconds(1, 8192, 0) == pytest.approx(8192 * 4e-5)                  # compute: active only


def test_pipeline_stages_keep_micro_batches_in_flight() -> None:
    # 2 devices as 2 stages of 1: a lone sequence crosses both stages in turn, as fast as on one device;
    # two sequences fill both stages, so each pass of the pair takes half as long per stage.
    reg = fleet(pool("p", dpr=2))
    piped = step_model(dataclass_replace(spec(reg, "p"), pp=2))
    # plus the stage sends: 2 a pass of the estimated hidden (sqrt(10e9 / (12 x 10)) = 9129) x 2 B a token of a
    # micro-batch over the 100 GB/s link
    send = 2 * 9129 * 2 / 100e9
    assert piped.pass_seconds(1, 1, 0) == pytest.approx(0.01 + send)
    assert piped.pass_seconds(2, 2, 0) == pytest.approx(0.01 + send)
    flat = step_model(spec(reg, "p"))
    # TP2 instead: 10 layers x 2 all-reduces, each moving 2 x 1/2 of the 9129 x 2 B message a token
    assert flat.pass_seconds(1, 1, 0) == pytest.approx(0.005 + 20 * 9129 * 2 / 100e9)


def dataclass_replace(p: PoolSpec, **changes: object) -> PoolSpec:
    import dataclasses
    return dataclasses.replace(p, **changes)  # type: ignore[arg-type]


def test_one_request_alone_by_hand() -> None:
    # Prefill of 1000 tokens is one compute-bound pass (0.04 s); then 99 passes decode, the j-th reading the
    # weights and 1001 + j tokens of KV.
    traffic = pl.DataFrame({"arrival_ms": [0], "in_tokens": [1000], "out_tokens": [100]})
    row = run_replay(ONE, traffic, fleet(pool("a")), 0).requests.row(0, named=True)
    decode = 99 * 0.01 + KV / 2e12 * sum(range(1001, 1100))
    assert row["ttft_s"] == pytest.approx(0.04)
    assert row["e2e_s"] == pytest.approx(0.04 + decode)
    assert row["tpot_s"] == pytest.approx(decode / 99)
    assert row["cost_usd"] == pytest.approx((0.04 + decode) / 3600)


@settings(max_examples=200, deadline=None)
@given(a=st.floats(1e-4, 1.0), b=st.floats(0.0, 1e-3), c=st.floats(1e-4, 1.0), o=st.floats(0.0, 0.01),
       k=st.integers(0, 5000))
def test_closed_form_runs_match_the_pass_by_pass_sum(a: float, b: float, c: float, o: float, k: int) -> None:
    by_loop = sum(max(a + b * j, c) + o for j in range(k))
    assert run_seconds(a, b, c, o, k) == pytest.approx(by_loop, rel=1e-9, abs=1e-12)
    total = run_seconds(a, b, c, o, k)
    assert passes_within(a, b, c, o, total) == k
    if k:
        assert passes_within(a, b, c, o, total - 1e-9 * max(1.0, total) - 1e-12) == k - 1


def test_twice_the_price_costs_twice_as_much_and_cost_min_prefers_the_cheaper_pool() -> None:
    """A pool twice as expensive, other things equal, costs twice as much for the same traffic.

    The seed design ranked pools by `total / hourly_cost`, which divides by the price and so makes the
    expensive pool look cheaper. Money must be busy_time x devices x hourly_cost / 3600, so doubling the
    price doubles the bill, and cost_min sends every request to the cheap pool.
    """
    traffic = pl.DataFrame({"arrival_ms": [0, 1000, 2000, 3000], "in_tokens": [1000, 500, 2000, 10],
                            "out_tokens": [100, 50, 10, 300]})
    cheap = run_replay(ONE, traffic, fleet(pool("cheap", cost=1.0)), 0).summary
    dear = run_replay(ONE, traffic, fleet(pool("dear", cost=2.0)), 0).summary
    assert cheap.busy_cost_usd > 0
    assert dear.busy_cost_usd == pytest.approx(2 * cheap.busy_cost_usd, rel=1e-12)
    assert dear.provisioned_cost_usd == pytest.approx(2 * cheap.provisioned_cost_usd, rel=1e-12)
    # money is busy seconds x 1 device x $1/h / 3600, and the requests' shares add up to it
    assert cheap.busy_cost_usd == pytest.approx(cheap.pools["cheap"].busy_s / 3600)
    both = run_replay(ONE, traffic, fleet(pool("dear", cost=2.0), pool("cheap", cost=1.0)), 0)
    assert both.requests["pool"].to_list() == ["cheap"] * 4
    assert both.requests["cost_usd"].sum() == pytest.approx(cheap.busy_cost_usd)


def test_money_by_hand() -> None:
    p = spec(fleet(pool("a", dpr=4, concurrency=8, cost=3.0)), "a")
    assert busy_cost(3600.0, p) == pytest.approx(12.0)          # an hour of a 4-device replica at $3/device-hour
    assert provisioned_cost(p, 3600.0) == pytest.approx(12.0)   # its one replica kept up for an hour


def test_a_70b_bf16_model_needs_more_than_one_80gb_device(fleet: Registry) -> None:
    llama, h100 = fleet.model("llama-3.1-70b"), fleet.chip("h100-sxm")
    reg = Registry("t", (h100,), (llama,), (
        pool("one", chip_id="h100-sxm", model_id="llama-3.1-70b", dpr=1),
        pool("eight", chip_id="h100-sxm", model_id="llama-3.1-70b", dpr=8)))
    one, eight = spec(reg, "one"), spec(reg, "eight")
    context = np.array([1000.0])
    assert llama.weight_bytes == pytest.approx(141.2e9)  # 70.6e9 params x 2 bytes
    assert one.kv_capacity_tokens == 0 and not fits_memory(context, one)[0]
    assert fits_memory(context, eight)[0]
    traffic = pl.DataFrame({"arrival_ms": [0], "in_tokens": [900], "out_tokens": [100], "model": ["llama-3.1-70b"]})
    refused = run_replay(ONE, traffic, Registry("t", (h100,), (llama,), (reg.pool("one"),)), 0)
    assert refused.summary.rejected == 1 and refused.summary.served == 0
    # judged by what the client sent: the 900-token prompt and room for one output token, 901 x 327,680 B of KV
    assert refused.requests["reason"][0] == ("prompt of 900 tokens and one output token need 141.5 GB for weights "
                                             "and KV cache; largest replica may use 72.0 GB (one: 1 x 80 GB x "
                                             "gpu_memory_utilization 0.9)")
    accepted = run_replay(ONE, traffic, Registry("t", (h100,), (llama,), (reg.pool("eight"),)), 0)
    assert accepted.summary.served == 1 and accepted.requests["pool"][0] == "eight"


@pytest.mark.parametrize(("context", "fits"), [(8_500, True), (8_600, False)])
def test_kv_cache_capacity_is_what_the_engine_may_use_after_the_weights(fleet: Registry, context: int,
                                                                       fits: bool) -> None:
    # Two H100s at gpu_memory_utilization 0.9 give 144 GB; weights take 141.2 GB; llama's KV is
    # 2 x 80 layers x 8 heads x 128 x 2 B = 327,680 B per token, so 2.8e9 / 327,680 = 8,544 tokens fit.
    reg = Registry("t", (fleet.chip("h100-sxm"),), (fleet.model("llama-3.1-70b"),), (
        pool("two", chip_id="h100-sxm", model_id="llama-3.1-70b", dpr=2),))
    assert spec(reg, "two").kv_capacity_tokens == 8544
    assert bool(fits_memory(np.array([float(context)]), spec(reg, "two"))[0]) is fits


def test_fp8_kv_cache_holds_twice_the_tokens(fleet: Registry) -> None:
    reg = Registry("t", (fleet.chip("h100-sxm"),), (fleet.model("llama-3.1-70b"),), (
        pool("two", chip_id="h100-sxm", model_id="llama-3.1-70b", dpr=4),))
    auto = spec(reg, "two")
    fp8 = dataclass_replace(auto, kv_cache_dtype="fp8")
    assert fp8.kv_bytes_per_token == auto.kv_bytes_per_token / 2 == 163_840
    assert fp8.kv_capacity_tokens == pytest.approx(2 * auto.kv_capacity_tokens, abs=1)


def test_context_window_and_model_must_match() -> None:
    reg = fleet(pool("small", model_id="s"), pool("big", model_id="m"),
                models=(model("s", max_context=4096), model("m")))
    small, big = spec(reg, "small"), spec(reg, "big")
    ctx = np.array([4096.0, 4097.0])
    assert fits_context(ctx, small).tolist() == [True, False]
    models = np.array(["s", "m", ""])
    assert feasible(models, np.array([10.0, 10.0, 10.0]), small).tolist() == [True, False, True]
    assert why_not("x", 10, 0, (small, big)) == "no pool serves model 'x'; served: m, s"
    assert why_not("s", 4096, 0, (small, big)) == ("prompt of 4,096 tokens and one output token exceed every model "
                                                   "window (largest 4,096)")
    assert why_not("s", 4000, 200, (small, big)) == ("prompt of 4,000 tokens plus max_tokens 200 exceed every model "
                                                     "window (largest 4,096)")


def test_kv_transfer_uses_the_slower_interconnect() -> None:
    reg = fleet(pool("fast", chip_id="f"), pool("slow", chip_id="s"),
                chips=(chip("f", link_gbps=400.0), chip("s", link_gbps=100.0)))
    fast, slow = spec(reg, "fast"), spec(reg, "slow")
    assert kv_transfer_seconds(10_000.0, fast, slow) == pytest.approx(10_000 * KV / 100e9)
    assert kv_transfer_seconds(10_000.0, fast, slow) == kv_transfer_seconds(10_000.0, slow, fast)


# -- the terms beyond the roofline: collectives, engine time, attention, experts ------------------------------

def _shaped(p: Pool, m: Model, c: Chip | None = None, **serving: object) -> PoolSpec:
    """The spec of pool p serving model m (on chip c), with serving fields replaced."""
    assert p.serving is not None
    p = dataclasses.replace(p, serving=dataclasses.replace(p.serving, **serving))  # type: ignore[arg-type]
    return spec(fleet(p, chips=(c or chip(),), models=(m,)), p.id)


def test_tensor_parallel_all_reduces_by_hand() -> None:
    # 80 layers, hidden 8192, TP4 in one node over a 450 GB/s link with 10 us a hop: every layer all-reduces its
    # attention and MLP output, a ring moves 2 x 3/4 of the 8192 x 2 B message per token in 2 x 3 hops.
    m = dataclasses.replace(model(layers=80), hidden_size=8192)
    link = dataclasses.replace(chip(), interconnect=Interconnect("nvlink", 450.0, latency_us=10.0))
    step = step_model(_shaped(pool("a", dpr=4), m, link))
    per_collective_token = 1.5 * 8192 * 2 / 450e9
    assert step.comm_s == pytest.approx(160 * 6 * 10e-6)
    assert step.comm_s_per_token == pytest.approx(160 * per_collective_token)
    assert step.fixed_seconds(1, 1) == pytest.approx(160 * (60e-6 + per_collective_token))       # 9.609 ms
    assert step.fixed_seconds(64, 256) == pytest.approx(160 * (60e-6 + 256 * per_collective_token))
    # the collectives add to the roofline pass; they do not shrink with more devices as memory and compute do
    free = dataclasses.replace(chip(), interconnect=Interconnect("ideal", 1e15))  # a link that costs nothing
    plain = step_model(_shaped(pool("a", dpr=4), m, free))
    assert step.pass_seconds(8, 8, 8000) - plain.pass_seconds(8, 8, 8000) == pytest.approx(step.fixed_seconds(8, 8))
    one = step_model(_shaped(pool("a", dpr=1), m, link))
    assert one.comm_s == one.comm_s_per_token == 0.0  # TP1 has nothing to all-reduce


def test_a_tensor_parallel_group_wider_than_a_node_uses_the_node_network() -> None:
    m = dataclasses.replace(model(layers=10), hidden_size=4096)
    p = dataclasses.replace(pool("w", dpr=16), devices_per_node=8,
                            network=Interconnect("roce", 50.0, latency_us=20.0))
    step = step_model(_shaped(p, m))
    assert step.comm_s == pytest.approx(20 * 30 * 20e-6)  # 2 x 15 hops of the network's 20 us
    assert step.comm_s_per_token == pytest.approx(20 * 2 * 15 / 16 * 4096 * 2 / 50e9)
    inside = step_model(_shaped(dataclasses.replace(p, devices_per_node=16), m))
    assert inside.comm_s_per_token == pytest.approx(20 * 2 * 15 / 16 * 4096 * 2 / 100e9)  # the chip's own link


def test_pipeline_sends_by_hand() -> None:
    # 2 stages of 4 across two nodes: each of the pp ticks of a pass sends hidden x 2 B per token of its
    # micro-batch over the 50 GB/s network, plus its latency; TP4 inside each stage all-reduces over the link.
    m = dataclasses.replace(model(layers=10), hidden_size=4096)
    p = dataclasses.replace(pool("s", dpr=8), devices_per_node=4, network=Interconnect("roce", 50.0, latency_us=5.0))
    step = step_model(_shaped(p, m, pp=2))
    tp_token = 20 * 1.5 * 4096 * 2 / 100e9
    assert step.comm_s == pytest.approx(2 * 5e-6)  # the chip link declares no latency
    assert step.comm_s_per_token == pytest.approx(tp_token + 2 * 4096 * 2 / 50e9)
    # two sequences make two micro-batches of one token each
    assert step.fixed_seconds(2, 2) == pytest.approx(2 * 5e-6 + step.comm_s_per_token * 1)


def test_engine_time_per_step_and_per_running_sequence() -> None:
    step = step_model(_shaped(pool("a"), model(), step_overhead_ms=2.0, seq_overhead_us=50.0))
    assert step.fixed_seconds(32, 32) == pytest.approx(2e-3 + 32 * 50e-6)       # 3.6 ms
    assert step.pass_seconds(32, 32, 0) == pytest.approx(0.01 + 3.6e-3)         # the weights' 10 ms as well


def test_touched_experts_and_their_all_to_all_by_hand() -> None:
    # 235B total, 22B active, 128 experts of which a token picks 8: an expert is (235 - 22) / 120 = 1.775B,
    # the dense part 22 - 8 x 1.775 = 7.8B. Four tokens touch 128 x (1 - (120/128)^4) = 29.12 experts.
    m = dataclasses.replace(model(params_b=235.0, active_b=22.0, layers=94, kv_heads=4), hidden_size=4096,
                            experts=128, experts_per_token=8)
    step = step_model(_shaped(pool("e", dpr=8), m, ep=8))
    touched = 128 * (1 - (120 / 128) ** 4)
    assert touched == pytest.approx(29.12, abs=0.01)
    assert step.weight_bytes_read(4) == pytest.approx((7.8 + touched * 1.775) * 2e9)
    assert step.weight_bytes_read(1) == pytest.approx(22e9 * 2)       # one token reads the active weights
    assert step.weight_bytes_read(100_000) == pytest.approx(235e9 * 2)  # a large batch reads them all
    # EP8 in one node: attention still all-reduces (1 per layer); the expert layers send every token to its
    # 8 experts and back, each device 8 x 4096 x 2 B x 7/64 per token, in 7 exchanges each way
    a2a = 94 * 2 * 8 * 4096 * 2 * 7 / 64 / 100e9
    assert step.comm_s_per_token == pytest.approx(94 * 1 * 2 * 7 / 8 * 4096 * 2 / 100e9 + a2a)
    assert step.comm_s == 0.0  # no latency declared


def _qwen3_like(**shape: int) -> Model:
    """235B total, 22B active, 128 routed experts of which a token picks 8: an expert is 1.775B, the dense part
    7.8B, and a token's routed share of the FLOPs 8 x 1.775 / 22 = 0.645."""
    return dataclasses.replace(model(params_b=235.0, active_b=22.0, layers=94, kv_heads=4), experts=128,
                               experts_per_token=8, **shape)


def test_routed_experts_take_their_own_roofline_by_hand() -> None:
    # One device at 2e12 B/s and 5e14 FLOP/s (ridge 250 FLOP/B); a token computes 2 x 22e9 / 5e14 = 8.8e-5 s.
    step = step_model(_shaped(pool("e"), _qwen3_like()))
    assert step.routed == pytest.approx(14.2 / 22)
    per_token = 2 * 22e9 / 5e14
    # A 2048-token chunk sends 2048 x 8 / 128 = 128 tokens to each expert (128 FLOP/B, under the ridge): the
    # experts read all 128 x 1.775e9 x 2 B = 454 GB at bandwidth (227 ms), apart from the dense part, which computes its
    # 7.8 / 22 of the FLOPs (63.9 ms) while its 15.6 GB read hides under that.
    touched = 128 * (1 - (120 / 128) ** 2048) * 1.775e9 * 2 / 2e12
    dense = (1 - 14.2 / 22) * 2048 * per_token
    assert step.pass_seconds(1, 2048, 0) == pytest.approx(touched + dense, rel=1e-9)
    assert step.pass_seconds(1, 2048, 0) == pytest.approx(0.2911, abs=1e-4)
    # one roofline over the whole pass would have let the experts' bytes hide under the dense part's FLOPs
    one = (7.8e9 * 2 + 128 * 1.775e9 * 2) / 2e12
    assert one == pytest.approx(0.235) and step.pass_seconds(1, 2048, 0) > 1.2 * one
    # At the two ends the rooflines agree: one decoding token reads its 8 experts and the dense part (22 ms);
    # 16384 prompt tokens (1024 a touched expert, over the ridge) compute every FLOP (1.44 s).
    assert step.pass_seconds(1, 1, 0, decode_tokens=1) == pytest.approx(22e9 * 2 / 2e12)
    assert step.pass_seconds(1, 16384, 0) == pytest.approx(16384 * per_token)
    # the pass's fixed part names the experts' time, which does not grow with the KV a run adds
    assert step.fixed_seconds(1, 2048) == pytest.approx(touched)


@settings(max_examples=200, deadline=None)
@given(seqs=st.integers(1, 256), prompt=st.integers(0, 16384), kv=st.floats(0.0, 2e6))
def test_routed_roofline_lies_between_one_roofline_and_no_overlap(seqs: int, prompt: int, kv: float) -> None:
    """The experts on their own roofline never beat one roofline over the pass (which overlaps every byte with
    every FLOP) nor lose to a pass that overlaps nothing."""
    own = step_model(_shaped(pool("e"), _qwen3_like()))
    single = step_model(_shaped(pool("e"), _qwen3_like()))
    single.routed = 0.0  # the same pass under one roofline
    tokens = seqs + prompt
    a, _, c, _, o = single.line(seqs + (prompt > 0), tokens, seqs, kv, 0.0)
    got = own.pass_seconds(seqs + (prompt > 0), tokens, kv, decode_tokens=seqs)
    assert max(a, c) + o <= got * (1 + 1e-12)
    assert got <= (a + c + o) * (1 + 1e-12)


def test_attention_compute_grows_with_context_and_decode_has_its_own_mfu() -> None:
    # 10 layers x 64 heads x 128 = 4 x 81,920 FLOPs per token and context token; at 1000 TFLOPS x 0.5 that is
    # 6.5536e-10 s. A 2048-token chunk from offset 0 has 2048 x 1024 token-context products.
    m = dataclasses.replace(model(), attention_heads=64)
    p = pool("a")
    p = dataclasses.replace(p, cost_model=dataclasses.replace(p.cost_model, mfu_decode=0.25))
    step = step_model(_shaped(p, m))
    assert step.s_per_ctx == pytest.approx(4 * 10 * 64 * 128 / 5e14)
    assert step.pass_seconds(1, 2048, 0, context=2048 * 1024.0) == pytest.approx(
        2048 * 4e-5 + 2048 * 1024 * 6.5536e-10)
    assert step.s_per_token_decode == pytest.approx(2 * 4e-5)  # decode at half the prefill's share of peak
    assert step.pass_seconds(512, 512, 0, decode_tokens=512) == pytest.approx(512 * 8e-5)


def test_one_request_with_every_term_by_hand() -> None:
    # The dense test model at TP2 (20e9 B over 2 devices: 5 ms a pass) with hidden 4096, 10 us a hop (2 a ring),
    # 1 ms per step and 100 us per sequence. A 1000-token prompt is one compute-bound pass; then 9 decode passes.
    m = dataclasses.replace(model(), hidden_size=4096)
    link = dataclasses.replace(chip(), interconnect=Interconnect("x", 100.0, latency_us=10.0))
    p = _shaped(pool("a", dpr=2), m, link, step_overhead_ms=1.0, seq_overhead_us=100.0)
    reg = fleet(dataclasses.replace(pool("a", dpr=2), serving=dataclasses.replace(
        pool("a", dpr=2).serving, step_overhead_ms=1.0, seq_overhead_us=100.0)), chips=(link,), models=(m,))
    traffic = pl.DataFrame({"arrival_ms": [0], "in_tokens": [1000], "out_tokens": [10]})
    row = run_replay(ONE, traffic, reg, 0).requests.row(0, named=True)
    ar = 20 * 1.0 * 4096 * 2 / 100e9  # per token: 2 all-reduces x 10 layers, a ring of 2 moves 2 x 1/2
    fixed = lambda tokens: 1e-3 + 100e-6 + 20 * 2 * 10e-6 + ar * tokens  # noqa: E731
    prefill = 1000 * 2e-5 + fixed(1000)
    decode = sum(0.005 + KV * (1001 + j) / 4e12 + fixed(1) for j in range(9))
    assert step_model(p).comm_s == pytest.approx(20 * 2 * 10e-6)
    assert row["ttft_s"] == pytest.approx(prefill)
    assert row["e2e_s"] == pytest.approx(prefill + decode)


@settings(max_examples=200, deadline=None)
@given(a=st.floats(1e-4, 1.0), b=st.floats(0.0, 1e-3), c=st.floats(1e-4, 1.0), d=st.floats(0.0, 1e-3),
       o=st.floats(0.0, 0.01), k=st.integers(0, 3000))
def test_closed_form_runs_with_growing_compute_match_the_sum(a: float, b: float, c: float, d: float, o: float,
                                                             k: int) -> None:
    by_loop = sum(max(a + b * j, c + d * j) + o for j in range(k))
    total = run_seconds(a, b, c, o, k, d)
    assert total == pytest.approx(by_loop, rel=1e-9, abs=1e-12)
    assert passes_within(a, b, c, o, total, d) == k
    if k:
        assert passes_within(a, b, c, o, total - 1e-9 * max(1.0, total) - 1e-12, d) == k - 1


def test_a_registry_without_the_new_fields_has_no_new_terms(fleet: Registry) -> None:
    old = dataclasses.replace(fleet, models=tuple(dataclasses.replace(
        m, hidden_size=0, attention_heads=0, experts=0, experts_per_token=0) for m in fleet.models))
    for p in resolve_pools(old, ONE):
        step = step_model(p)
        assert (step.seq_overhead_s, step.s_per_ctx, step.dense_bytes) == (0.0, 0.0, 0.0)
        # the collectives move activations of the estimated hidden size, as if it were declared
        declared = step_model(dataclasses.replace(p, model=dataclasses.replace(p.model,
                                                                               hidden_size=p.model.estimated_hidden)))
        assert (step.comm_s, step.comm_s_per_token) == (declared.comm_s, declared.comm_s_per_token)
        assert (step.comm_s_per_token > 0) == (p.tp > 1 or p.pp > 1)
        assert step.s_per_token_decode == step.s_per_token
        assert step.serial_share == 0.0  # the roofline's max(memory, compute)


def test_full_batch_cost_by_hand_for_every_pool_at_once() -> None:
    """What policies rank pools by, for a 1000-token prompt (600 cached) and 100 output tokens: the prompt's 400
    tokens at 4e-5 s each, then each output token 1/max_concurrency of a full pass over contexts of
    1000 + 100/2 tokens, at the pool's cost per second; both pools priced in one call."""
    reg = fleet(pool("a", concurrency=8), pool("b", chip_id="fast", concurrency=1, cost=2.0),
                chips=(chip(), chip("fast", bw_tbps=8.0)))
    pools = (spec(reg, "a"), spec(reg, "b"))
    ins, cached, outs = np.array([1000.0, 1000.0]), np.array([600.0, 0.0]), np.array([100.0, 1.0])
    # a: 8 sequences of 1050 tokens read 2e10 B of weights and 8 x 1050 x KV B at 2e12 B/s; b: one at 4e12 B/s
    pass_a = (2e10 + 8 * 1050 * KV) / 2e12
    pass_b = (2e10 + 1050 * KV) / 4e12
    want = np.array([[(400 * 4e-5 + 100 * pass_a / 8) / 3600, (1000 * 4e-5 + (2e10 + 8 * 1000.5 * KV) / 2e12 / 8)
                      / 3600],
                     [(400 * 4e-5 + 100 * pass_b) * 2 / 3600, (1000 * 4e-5 + (2e10 + 1000.5 * KV) / 4e12) * 2 / 3600]])
    got = full_batch_costs(ins, cached, outs, pools)
    np.testing.assert_allclose(got, want, rtol=1e-12)
    for k, p in enumerate(pools):  # the one-pool form is the same figures to the last bit
        assert full_batch_cost(ins, cached, outs, p).tolist() == got[k].tolist()


def test_a_serial_share_adds_that_share_of_the_shorter_of_memory_and_compute_by_hand() -> None:
    # pool a: 10 ms of weights a pass, 4e-5 s of compute a token. 100 decoders without KV: memory 10 ms, compute
    # 4 ms, so at a serial share of 0.5 the pass takes 10 + 2 ms; one 2048-token chunk: 81.92 ms of compute,
    # 10 ms of weights, so 81.92 + 5 ms; at share 1 the two add up.
    p = pool("a")
    for share, decode_ms, chunk_ms in ((0.0, 10.0, 81.92), (0.5, 12.0, 86.92), (1.0, 14.0, 91.92)):
        q = dataclasses.replace(p, cost_model=dataclasses.replace(p.cost_model, serial_share=share))
        step = step_model(spec(fleet(q), "a"))
        assert step.pass_seconds(100, 100, 0, decode_tokens=100) * 1000 == pytest.approx(decode_ms)
        assert step.pass_seconds(1, 2048, 0) * 1000 == pytest.approx(chunk_ms)
        # what policies rank pools by sees the same pass: 8 sequences of 1050 tokens (memory-bound), per token
        memory, compute = (2e10 + 8 * 1050 * KV) / 2e12, 8 * 4e-5
        want = (400 * 4e-5 + 100 * (memory + share * compute) / 8) / 3600
        got = full_batch_cost(np.array([1000.0]), np.array([600.0]), np.array([100.0]), spec(fleet(
            dataclasses.replace(q, serving=dataclasses.replace(q.serving, max_concurrency=8))), "a"))  # type: ignore[arg-type]
        assert got[0] == pytest.approx(want, rel=1e-12)


@settings(max_examples=200, deadline=None)
@given(a=st.floats(1e-4, 1.0), b=st.floats(0.0, 1e-3), c=st.floats(1e-4, 1.0), d=st.floats(0.0, 1e-3),
       u=st.floats(0.0, 1.0), o=st.floats(0.0, 0.01), k=st.integers(0, 2000))
def test_a_serial_share_keeps_runs_in_closed_form(a: float, b: float, c: float, d: float, u: float, o: float,
                                                  k: int) -> None:
    """max(M, C) + u min(M, C) is max(M + u C, C + u M) for u <= 1: the replica's runs stay two lines."""
    by_loop = sum(max(a + b * j, c + d * j) + u * min(a + b * j, c + d * j) + o for j in range(k))
    total = run_seconds(a + u * c, b + u * d, c + u * a, o, k, d + u * b)
    assert total == pytest.approx(by_loop, rel=1e-9, abs=1e-12)
