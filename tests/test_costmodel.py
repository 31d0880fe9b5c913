"""The roofline cost model, money, and the static memory and context constraints, against hand arithmetic."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from pool_registry import Registry
from replay import Candidate, run_replay
from replay.constraints import feasible, fits_context, fits_memory, why_not
from replay.costmodel import decode_seconds, kv_transfer_seconds, prefill_seconds, provisioned_cost, slot_cost
from replay.fleet import PoolSpec, resolve_pools
from tests.replay_fleets import chip, fleet, model, pool

ONE = Candidate(name="t", policy="cost_min")


def spec(reg: Registry, pool_id: str) -> PoolSpec:
    return {p.id: p for p in resolve_pools(reg, ONE)}[pool_id]


def test_prefill_and_decode_follow_the_seed_formula() -> None:
    # 1000 TFLOPS x mfu 0.5 = 5e14 FLOP/s; 2 x 1000 tokens x 10e9 params = 2e13 FLOP -> 0.04 s.
    # 4 TB/s x 0.5 = 2e12 B/s; a token reads 10e9 x 2 B = 2e10 B -> 0.01 s per token.
    p = spec(fleet(pool("a")), "a")
    assert prefill_seconds(1000.0, 0.0, p) == pytest.approx(0.04)
    assert prefill_seconds(1000.0, 600.0, p) == pytest.approx(0.016)  # cached prefix skips prefill
    assert decode_seconds(100.0, p) == pytest.approx(1.0)
    wide = spec(fleet(pool("w", dpr=4)), "w")  # four devices: a quarter of the time
    assert prefill_seconds(1000.0, 0.0, wide) == pytest.approx(0.01)
    assert decode_seconds(100.0, wide) == pytest.approx(0.25)


def test_money_is_busy_time_times_devices_times_price_shared_by_slots() -> None:
    p = spec(fleet(pool("a", dpr=4, concurrency=8, cost=3.0)), "a")
    # 3600 s on one slot of a 4-device replica at $3/device-hour, shared by 8 slots: 4 x 3 / 8 = $1.50.
    assert slot_cost(3600.0, p) == pytest.approx(1.5)
    # Keeping the pool's one replica up for an hour costs all its devices: 4 x $3.
    assert provisioned_cost(p, 3600.0) == pytest.approx(12.0)


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
    assert cheap.cost_usd > 0
    assert dear.cost_usd == pytest.approx(2 * cheap.cost_usd, rel=1e-12)
    # By hand: prefill 2 x 3510 tokens x 1e10 / 5e14 = 0.1404 s, decode 460 x 0.01 = 4.6 s, at $1/h.
    assert cheap.cost_usd == pytest.approx((0.1404 + 4.6) / 3600)
    both = run_replay(ONE, traffic, fleet(pool("dear", cost=2.0), pool("cheap", cost=1.0)), 0)
    assert both.requests["pool"].to_list() == ["cheap"] * 4
    assert both.summary.cost_usd == pytest.approx(cheap.cost_usd)


def test_a_70b_bf16_model_needs_more_than_one_80gb_device(fleet: Registry) -> None:
    llama, h100 = fleet.model("llama-3.1-70b"), fleet.chip("h100-sxm")
    reg = Registry("t", (h100,), (llama,), (
        pool("one", chip_id="h100-sxm", model_id="llama-3.1-70b", dpr=1),
        pool("eight", chip_id="h100-sxm", model_id="llama-3.1-70b", dpr=8)))
    one, eight = spec(reg, "one"), spec(reg, "eight")
    context = np.array([1000.0])
    assert llama.weight_bytes == pytest.approx(141.2e9)  # 70.6e9 params x 2 bytes
    assert not fits_memory(context, one)[0]
    assert fits_memory(context, eight)[0]
    traffic = pl.DataFrame({"arrival_ms": [0], "in_tokens": [900], "out_tokens": [100], "model": ["llama-3.1-70b"]})
    refused = run_replay(ONE, traffic, Registry("t", (h100,), (llama,), (reg.pool("one"),)), 0)
    assert refused.summary.rejected == 1 and refused.summary.served == 0
    assert refused.requests["reason"][0] == ("needs 141.5 GB for weights and KV cache; largest replica has 80.0 GB "
                                             "(one: 1 x 80 GB)")
    accepted = run_replay(ONE, traffic, Registry("t", (h100,), (llama,), (reg.pool("eight"),)), 0)
    assert accepted.summary.served == 1 and accepted.requests["pool"][0] == "eight"


@pytest.mark.parametrize(("context", "fits"), [(57_000, True), (57_500, False)])
def test_kv_cache_of_the_whole_context_counts_against_memory(fleet: Registry, context: int, fits: bool) -> None:
    # Two H100s hold 160 GB; weights take 141.2 GB; llama's KV is 2 x 80 layers x 8 heads x 128 x 2 B
    # = 327,680 B per token, so 18.8e9 / 327,680 = 57,373 tokens fit.
    reg = Registry("t", (fleet.chip("h100-sxm"),), (fleet.model("llama-3.1-70b"),), (
        pool("two", chip_id="h100-sxm", model_id="llama-3.1-70b", dpr=2),))
    assert bool(fits_memory(np.array([float(context)]), spec(reg, "two"))[0]) is fits


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
    # KV per token: 2 x 10 layers x 8 heads x 128 x 2 B = 40,960 B; 10,000 tokens over 100 GB/s.
    assert kv_transfer_seconds(10_000.0, fast, slow) == pytest.approx(10_000 * 40_960 / 100e9)
    assert kv_transfer_seconds(10_000.0, fast, slow) == kv_transfer_seconds(10_000.0, slow, fast)
