"""Ranking: the plans' latencies are `replay bench`'s for the same layout and coefficients; order; missed targets."""

from __future__ import annotations

import pytest

from pool_registry import Registry
from replay import Candidate, PoolOverride, closed_loop, default_requests
from replay.fleet import resolve_pools
from replay.planner import PlanSettings, Targets, plan_model, report_lines
from tests.planner_fleets import DENSE_70B_FP8, pool, registry

SETTINGS = PlanSettings(concurrency=(1, 16, 64))


def test_the_latencies_are_replay_benchs_for_the_registrys_own_layout(fleet: Registry) -> None:
    report = plan_model(fleet, "llama-3.1-70b", ("h100-a",), SETTINGS)
    spec = next(s for s in resolve_pools(fleet, Candidate(name="r")) if s.id == "h100-a")
    assert (spec.tp, spec.pp, spec.max_concurrency) == (4, 1, 64)
    plan = next(p for p in report.plans if (p.layout.tp, p.layout.pp, p.concurrency) == (4, 1, 64))
    bench = closed_loop(spec, 64, 1024, 128, default_requests(64))
    assert (plan.ttft_ms_p50, plan.ttft_ms_p99, plan.tpot_ms_p50, plan.tpot_ms_p99) == (
        bench.ttft_ms_p50, bench.ttft_ms_p99, bench.tpot_ms_p50, bench.tpot_ms_p99)
    assert plan.output_tok_s_per_device == bench.output_tok_s / 4
    # busy money: the replica is busy from the first send to the last completion, shared by every token
    tokens = bench.requests * (1024 + 128)
    assert plan.usd_per_mtok == pytest.approx(4 * 3.20 / 3600 * bench.duration_s / tokens * 1e6)


def test_calibrated_coefficients_and_collectives_time_as_replay_bench_does() -> None:
    """A model with a hidden size (collectives), pipeline stages, engine overheads and a candidate's fit."""
    serving = {"model": "dense-70b-fp8", "replicas": 2, "devices_per_replica": 8, "pp": 2, "max_concurrency": 16,
               "step_overhead_ms": 3.0, "seq_overhead_us": 20.0}
    reg = registry([DENSE_70B_FP8], [pool(devices=16, serving=serving,
                                          network={"kind": "roce", "bw_gbps": 50, "latency_us": 8})])
    fit = Candidate(name="fit", pools={"h100-x": PoolOverride(mfu=0.3, mem_bw_eff=0.6, step_overhead_ms=4.0,
                                                              collective_us=12.0)})
    report = plan_model(reg, "dense-70b-fp8", settings=PlanSettings(concurrency=(16,)), candidate=fit)
    spec = resolve_pools(reg, fit)[0]
    plan = next(p for p in report.plans if (p.layout.tp, p.layout.pp) == (4, 2))
    bench = closed_loop(spec, 16, 1024, 128, default_requests(16))
    assert (plan.ttft_ms_p50, plan.tpot_ms_p50, plan.output_tok_s_per_device) == (
        bench.ttft_ms_p50, bench.tpot_ms_p50, bench.output_tok_s / 8)
    without = plan_model(reg, "dense-70b-fp8", settings=PlanSettings(concurrency=(16,)))
    same = next(p for p in without.plans if (p.layout.tp, p.layout.pp) == (4, 2))
    assert same.tpot_ms_p50 != plan.tpot_ms_p50  # the candidate's coefficients were used


def test_without_targets_the_highest_throughput_per_device_comes_first(fleet: Registry) -> None:
    report = plan_model(fleet, "llama-3.1-70b", ("h100-a", "gaudi3-a"), SETTINGS)
    fitting = [p for p in report.plans if p.fits]
    speeds = [p.output_tok_s_per_device for p in fitting]
    assert speeds == sorted(speeds, reverse=True)  # type: ignore[type-var]
    assert all(p.meets_targets for p in fitting)  # no target: every fitting plan meets them
    assert not any(p.fits for p in report.plans[len(fitting):])  # those that do not fit come last
    assert report.best is fitting[0]


def test_with_targets_the_cheapest_that_meets_them_comes_first(fleet: Registry) -> None:
    targets = Targets(ttft_ms=100.0, tpot_ms=30.0)
    report = plan_model(fleet, "llama-3.1-70b", ("h100-a", "gaudi3-a"), PlanSettings(targets=targets))
    meeting = [p for p in report.plans if p.meets_targets]
    assert meeting and list(report.plans[:len(meeting)]) == meeting
    for p in meeting:
        assert p.ttft_ms_p50 is not None and p.ttft_ms_p50 <= 100 and p.tpot_ms_p50 is not None and \
            p.tpot_ms_p50 <= 30
    costs = [p.usd_per_mtok for p in meeting]
    assert costs == sorted(costs)  # type: ignore[type-var]
    missing = [p for p in report.plans if p.fits and not p.meets_targets]
    assert missing and all((p.ttft_ms_p50 or 0) > 100 or (p.tpot_ms_p50 or 0) > 30 for p in missing)
    assert report.misses == ()


def test_impossible_targets_say_which_fails_and_by_how_much(fleet: Registry) -> None:
    report = plan_model(fleet, "llama-3.1-70b", ("h100-a",), PlanSettings(targets=Targets(ttft_ms=5000,
                                                                                          tpot_ms=0.5)))
    fastest = min((p for p in report.plans if p.fits), key=lambda p: p.tpot_ms_p50 or 1e9)
    assert report.best is None and len(report.misses) == 1
    v = fastest.tpot_ms_p50
    assert v is not None
    assert report.misses[0] == (f"TPOT p50 <= 0.5 ms fails: the fastest layout (h100-a {fastest.layout.label} at "
                                f"concurrency {fastest.concurrency}) reaches {v:.1f} ms, {v - 0.5:.1f} ms "
                                f"({(v - 0.5) / 0.5:.0%}) over")
    assert f"targets missed: {report.misses[0]}" in report_lines(report)


def test_targets_met_apart_but_never_together_are_named(fleet: Registry) -> None:
    plans = [p for p in plan_model(fleet, "llama-3.1-70b", ("h100-a",), SETTINGS).plans if p.fits]
    ttft = min(p.ttft_ms_p50 for p in plans if p.ttft_ms_p50 is not None)
    tpot = min(p.tpot_ms_p50 for p in plans if p.tpot_ms_p50 is not None)
    both = [p for p in plans if p.ttft_ms_p50 == ttft and p.tpot_ms_p50 == tpot]
    assert not both, "one layout is best at both; pick other targets"
    report = plan_model(fleet, "llama-3.1-70b", ("h100-a",), PlanSettings(targets=Targets(ttft, tpot)))
    assert report.best is None
    assert report.misses[0].startswith("each target is met by some layout but no layout meets them together")
