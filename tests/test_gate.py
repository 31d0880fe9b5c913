"""The regression gate: tolerances from YAML, reasons for every failed check."""

from __future__ import annotations

import dataclasses

import polars as pl
import pytest

from replay import Candidate, Gate, GateError, PoolOverride, SlaTier, evaluate, load_gate_text, run_replay
from replay.candidate import PredictorSpec
from replay.summary import Summary
from tests.replay_fleets import fleet, pool

TRAFFIC = pl.DataFrame({"arrival_ms": [0, 500, 1000, 1500], "in_tokens": [1000, 2000, 500, 100],
                        "out_tokens": [100, 50, 200, 20]})
REG = fleet(pool("a", cost=1.0, concurrency=4))
BASE = Candidate(name="base", policy="sla_cost", sla_tiers={"standard": SlaTier(ttft_s=1.0, e2e_s=10.0)})
GATE = Gate(max_cost_increase_pct=5, max_ttft_p99_increase_pct=10, max_sla_violation_increase_pts=1)


def test_gate_file_loads() -> None:
    text = "max_cost_increase_pct: 5\nmax_ttft_p99_increase_pct: 10.5\nmax_sla_violation_increase_pts: -1\n"
    assert load_gate_text(text) == Gate(5.0, 10.5, -1.0)


@pytest.mark.parametrize(("text", "expected"), [
    ("max_cost_increase: 5\n", "g.yaml:1: max_cost_increase: unknown key 'max_cost_increase'; did you mean "
                               "'max_cost_increase_pct'?"),
    ("max_cost_increase_pct: five\n", "g.yaml:1: max_cost_increase_pct: expected a number, got 'five' (string)"),
    ("", "g.yaml: empty file"),
    ("{}\n", "g.yaml:1: no tolerance given"),
    ("max_sla_violation_rate: 1.5\n", "g.yaml:1: max_sla_violation_rate: a share from 0 to below 1 (0.01 is 1 %), "
                                      "got 1.5"),
])
def test_bad_gate_files(text: str, expected: str) -> None:
    with pytest.raises(GateError) as exc:
        load_gate_text(text, "g.yaml")
    assert str(exc.value.problems[0]).startswith(expected)


def test_an_absolute_sla_violation_limit_is_the_runway_tolerance() -> None:
    gate = load_gate_text("max_sla_violation_rate: 0.02\n")
    assert gate.sla_tolerance == 0.02 and Gate(max_cost_increase_pct=5).sla_tolerance == 0.01
    base = _summary(10.0, 1.0, 0.01)
    verdict = evaluate(gate, base, dataclasses.replace(base, sla_violation_rate=0.025))
    assert verdict.reasons == ["sla_violation_rate 2.50% against a limit of 2%"]
    assert evaluate(gate, base, base).passed


def test_the_gate_fails_a_candidate_that_raises_cost_with_the_reason() -> None:
    dearer = dataclasses.replace(BASE, name="dearer", pools={"a": PoolOverride(hourly_cost_per_device=1.2)})
    base = run_replay(BASE, TRAFFIC, REG, 0).summary
    cand = run_replay(dearer, TRAFFIC, REG, 0).summary
    verdict = evaluate(GATE, base, cand)
    assert not verdict.passed and verdict.verdict == "fail"
    # a dearer price raises busy and provisioned cost alike, and the gate names both
    assert [c.name for c in verdict.checks if not c.passed] == ["busy cost", "provisioned cost"]
    assert [c.change for c in verdict.checks[:2]] == [pytest.approx(20.0), pytest.approx(20.0)]
    assert verdict.reasons[0] == (f"busy cost rose +20.00% (baseline ${base.busy_cost_usd:,.2f} -> candidate "
                                  f"${cand.busy_cost_usd:,.2f}); limit +5%")
    assert verdict.reasons[1].startswith("provisioned cost rose +20.00%")
    assert evaluate(GATE, base, base).passed


def _summary(cost: float, p99: float | None, viol: float, provisioned: float = 100.0) -> Summary:
    base = run_replay(BASE, TRAFFIC, REG, 0).summary
    return dataclasses.replace(base, busy_cost_usd=cost, provisioned_cost_usd=provisioned, ttft_p99=p99,
                               sla_violation_rate=viol)


def test_latency_and_sla_checks_by_hand() -> None:
    verdict = evaluate(GATE, _summary(10.0, 1.0, 0.010), _summary(10.4, 1.2, 0.025))
    assert [(c.name, c.passed) for c in verdict.checks] == [
        ("busy cost", True), ("provisioned cost", True), ("ttft_p99", False), ("sla_violation_rate", False)]
    assert verdict.reasons == [
        "ttft_p99 rose +20.00% (baseline 1.000s -> candidate 1.200s); limit +10%",
        "sla_violation_rate rose +1.50 points (baseline 1.00% -> candidate 2.50%); limit +1 points"]


def test_a_run_that_serves_nothing_cannot_pass_the_latency_check() -> None:
    verdict = evaluate(Gate(max_ttft_p99_increase_pct=10), _summary(1, 1.0, 0), _summary(1, None, 1.0))
    assert verdict.reasons == ["ttft_p99 cannot be compared: a run served no request"]


def test_untolerated_measures_are_not_checked() -> None:
    verdict = evaluate(Gate(max_cost_increase_pct=0), _summary(10, 1.0, 0.0), _summary(9, 50.0, 0.5))
    assert verdict.passed and [c.name for c in verdict.checks] == ["busy cost", "provisioned cost"]


def test_more_provisioned_capacity_fails_the_cost_gate_even_when_busy_cost_barely_moves() -> None:
    """Twice the replicas doubles what the pool costs to keep up, whatever the busy time says."""
    verdict = evaluate(Gate(max_cost_increase_pct=5), _summary(10.0, 1.0, 0.0, provisioned=100.0),
                       _summary(10.2, 1.0, 0.0, provisioned=200.0))
    assert [(c.name, c.passed) for c in verdict.checks] == [("busy cost", True), ("provisioned cost", False)]
    assert verdict.reasons == ["provisioned cost rose +100.00% (baseline $100.00 -> candidate $200.00); limit +5%"]


def test_runs_whose_routers_know_different_things_fail_the_gate() -> None:
    """An oracle baseline knows every output length; a candidate that predicts them would fail against it for
    what it cannot know, and pass against a worse predictor for what it was told: both are refused."""
    oracle = dataclasses.replace(BASE, name="oracle", predictor=PredictorSpec("oracle"))
    base = run_replay(BASE, TRAFFIC, REG, 0).summary
    knowing = run_replay(oracle, TRAFFIC, REG, 0).summary
    verdict = evaluate(GATE, knowing, base)
    assert not verdict.passed and verdict.checks[0].name == "predictor"
    assert verdict.reasons[0] == ("predictors differ: candidate 'online', baseline 'oracle'; the gate compares "
                                  "runs whose routers know the same about output lengths, so give both the same "
                                  "predictor")
    fixed = run_replay(dataclasses.replace(BASE, predictor=PredictorSpec("fixed", {"tokens": 64})), TRAFFIC, REG,
                       0).summary
    assert "candidate 'online', baseline 'fixed (64 tokens)'" in evaluate(GATE, fixed, base).reasons[0]
    assert [c.name for c in evaluate(GATE, base, base).checks] == ["busy cost", "provisioned cost", "ttft_p99",
                                                                    "sla_violation_rate"]
