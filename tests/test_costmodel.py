"""The roofline pass model, its closed-form runs, money, and the static constraints, against hand arithmetic."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pool_registry import Registry
from replay import Candidate, run_replay
from replay.constraints import feasible, fits_context, fits_memory, why_not
from replay.costmodel import (
    StepModel,
    busy_cost,
    decode_seconds,
    kv_transfer_seconds,
    passes_within,
    prefill_seconds,
    provisioned_cost,
    run_seconds,
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
    step = StepModel.of(spec(fleet(pool("a")), "a"))
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
    step = StepModel.of(spec(moe, "e"))
    assert step.pass_seconds(1, 1, 0) == pytest.approx(0.01)
    touched = 2e11 * (1 - 0.9**8) / 2e12
    assert step.pass_seconds(8, 8, 8000) == pytest.approx(touched + 8000 * KV / 2e12)   # memory-bound
    assert step.pass_seconds(1, 256, 0) == pytest.approx(0.1, rel=1e-9)                 # all experts read
    assert step.pass_seconds(1, 8192, 0) == pytest.approx(8192 * 4e-5)                  # compute: active only


def test_pipeline_stages_keep_micro_batches_in_flight() -> None:
    # 2 devices as 2 stages of 1: a lone sequence crosses both stages in turn, as fast as on one device;
    # two sequences fill both stages, so each pass of the pair takes half as long per stage.
    reg = fleet(pool("p", dpr=2))
    piped = StepModel.of(dataclass_replace(spec(reg, "p"), pp=2))
    assert piped.pass_seconds(1, 1, 0) == pytest.approx(0.01)
    assert piped.pass_seconds(2, 2, 0) == pytest.approx(0.01)
    flat = StepModel.of(spec(reg, "p"))
    assert flat.pass_seconds(1, 1, 0) == pytest.approx(0.005)


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
    assert refused.requests["reason"][0] == ("needs 141.5 GB for weights and KV cache; largest replica may use "
                                             "72.0 GB (one: 1 x 80 GB x gpu_memory_utilization 0.9)")
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
    assert why_not("x", 10, (small, big)) == "no pool serves model 'x'; served: m, s"
    assert why_not("s", 5000, (small, big)) == "context of 5000 tokens exceeds every model window (largest 4096)"


def test_kv_transfer_uses_the_slower_interconnect() -> None:
    reg = fleet(pool("fast", chip_id="f"), pool("slow", chip_id="s"),
                chips=(chip("f", link_gbps=400.0), chip("s", link_gbps=100.0)))
    fast, slow = spec(reg, "fast"), spec(reg, "slow")
    assert kv_transfer_seconds(10_000.0, fast, slow) == pytest.approx(10_000 * KV / 100e9)
    assert kv_transfer_seconds(10_000.0, fast, slow) == kv_transfer_seconds(10_000.0, slow, fast)
