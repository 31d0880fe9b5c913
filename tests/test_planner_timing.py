"""A layout as the replay sees it: the PoolSpec `replay bench` resolves from the serving block the plan writes."""

from __future__ import annotations

from pool_registry import Registry
from replay import Candidate, PoolOverride
from replay.fleet import resolve_pools
from replay.planner import (
    Coefficients,
    Layout,
    PlanSettings,
    coefficients_of,
    engine_of,
    plan_model,
    serving_block,
    spec_of,
)
from tests.planner_fleets import DENSE_70B_FP8, pool, registry


def test_the_registrys_own_layout_is_the_spec_replay_resolves(fleet: Registry) -> None:
    for served in resolve_pools(fleet, Candidate(name="r")):
        p = fleet.pool(served.id)
        assert p.serving is not None
        layout = Layout(p.id, served.tp, served.pp, served.ep, p.serving.replicas)
        assert spec_of(fleet, p, p.serving.model, layout, p.serving.max_concurrency, coefficients_of(p)) == served


def test_a_pools_schedule_is_the_one_its_layouts_are_timed_and_written_with() -> None:
    # an SGLang pool (prompts first, each pass composed while the one before runs) is planned as it schedules
    serving = {"model": "dense-70b-fp8", "replicas": 1, "devices_per_replica": 8, "max_concurrency": 16,
               "schedule": "prefill_first", "async_scheduling": True}
    reg = registry([DENSE_70B_FP8], [pool(serving=serving)])
    p = reg.pools[0]
    spec = spec_of(reg, p, "dense-70b-fp8", Layout("h100-x", 8, 1, 1, 1), 16, coefficients_of(p))
    assert spec == resolve_pools(reg, Candidate(name="r"))[0]
    assert (spec.schedule, spec.async_scheduling) == ("prefill_first", True)
    plan = next(x for x in plan_model(reg, "dense-70b-fp8", ("h100-x",), PlanSettings(concurrency=(16,))).plans
                if x.fits)
    block = serving_block(p, "dense-70b-fp8", plan)
    assert (block["schedule"], block["async_scheduling"]) == ("prefill_first", True)


def test_a_candidates_fit_replaces_the_registrys_coefficients() -> None:
    serving = {"model": "dense-70b-fp8", "replicas": 1, "devices_per_replica": 8, "max_concurrency": 16,
               "step_overhead_ms": 3.0, "seq_overhead_us": 20.0, "gpu_memory_utilization": 0.85,
               "kv_cache_dtype": "fp8", "max_num_batched_tokens": 4096}
    reg = registry([DENSE_70B_FP8], [pool(serving=serving)])
    p = reg.pools[0]
    assert coefficients_of(p) == Coefficients(0.45, 0.75, None, None, 3.0, 20.0)
    fit = Candidate(name="fit", pools={"h100-x": PoolOverride(mfu=0.3, step_overhead_ms=0.0, collective_us=9.0)})
    assert coefficients_of(p, fit) == Coefficients(0.3, 0.75, None, 9.0, 0.0, 20.0)
    engine = engine_of(p)
    assert (engine.gpu_memory_utilization, engine.kv_cache_dtype, engine.max_num_batched_tokens) == (0.85, "fp8", 4096)
    # a concurrency above the step budget raises the budget, as the serving block written does
    assert spec_of(reg, p, "dense-70b-fp8", Layout("h100-x", 8, 1, 1, 1), 5000, coefficients_of(p)) \
        .max_num_batched_tokens == 5000


def test_a_pool_without_serving_plans_with_the_engine_defaults() -> None:
    reg = registry([DENSE_70B_FP8], [pool()])
    p = reg.pools[0]
    assert coefficients_of(p) == Coefficients(0.45, 0.75)
    assert (engine_of(p).gpu_memory_utilization, engine_of(p).max_num_batched_tokens) == (0.9, 8192)
