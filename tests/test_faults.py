"""Failures and throttling in the replay (replay.faults, the simulator's outages, sla_cost's failure risk).

The fleets use the flat-KV model of tests/replay_fleets.py: every memory-bound pass takes 0.01 s, so a request
of 100 output tokens decodes in 1 s on an unthrottled replica.
"""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest
import yaml

from replay import Candidate, SlaTier, run_replay
from replay.candidate import FaultSpec, PoolFaults, PredictorSpec
from replay.candidate_loader import candidate_to_dict, load_candidate_text
from replay.exceptions import CandidateError
from replay.faults import PoolFaultModel, from_telemetry, next_failure, resolve
from replay.gate import Gate, evaluate
from tests.replay_fleets import chip, flat_model, pool
from tests.replay_fleets import fleet as make_fleet

ORACLE = PredictorSpec("oracle")
FAULT_SEED = 0xFA17  # the outage generator's stream beside the run's seed (replay.simulator.Outage)


def fleet(*pools: object) -> object:
    """A flat-KV fleet."""
    return make_fleet(*pools, chips=(chip(),), models=(flat_model(max_context=10**9),))  # type: ignore[arg-type]


def planted(**pools: PoolFaults) -> FaultSpec:
    """Faults given by the candidate for these pools, no telemetry."""
    return FaultSpec(pools=pools)


def test_a_failed_request_is_retried_on_the_pool_that_is_up_by_hand() -> None:
    # Pool a (cheapest) fails at rate 1/s and stays down for good; b never fails. The first request runs on a
    # until a fails at tf (drawn from the outage stream), then starts again on b: 100,000 tokens at 0.01 s.
    reg = fleet(pool("a", cost=1.0), pool("b", cost=2.0))
    cand = Candidate(name="t", policy="cost_min", predictor=ORACLE,
                     faults=planted(a=PoolFaults(failures_per_device_hour=3600.0, repair_s=1e7)))
    traffic = pl.DataFrame({"arrival_ms": [0, 2_000_000], "in_tokens": 0, "out_tokens": [100_000, 100]})
    tf = next_failure(np.random.default_rng([0, FAULT_SEED]), 1.0, 0.0)
    assert 0 < tf < 1000
    result = run_replay(cand, traffic, reg, 0)
    rows, s = result.requests, result.summary
    assert rows["pool"].to_list() == ["b", "b"]
    assert rows["retries"].to_list() == [1, 0]
    # the retry runs as the same request would alone on b (1000 s, and 0.01 s for its growing 4 B/token KV reads)
    alone = run_replay(Candidate(name="t", policy="cost_min", predictor=ORACLE), traffic.head(1),
                       fleet(pool("b")), 0).requests
    assert float(alone["e2e_s"][0]) == pytest.approx(1000.0, abs=0.011)
    assert rows["e2e_s"][0] == pytest.approx(tf + alone["e2e_s"][0], rel=1e-9)
    assert rows["ttft_s"][0] == pytest.approx(tf + 0.01, rel=1e-9)  # the retry streams its first token again
    assert rows["e2e_s"][1] == pytest.approx(1.0)
    assert s.failures == {"a": 1, "b": 0}
    assert (s.retried, s.retries_missed_sla) == (1, 0)
    assert abs(s.work_lost_tokens - math.floor(tf / 0.01)) <= 1  # one token a pass until the failure
    assert s.faults["a"]["source"] == "candidate"


def test_failures_arrive_at_the_planted_rate_and_nothing_is_lost() -> None:
    # Four 1-device replicas at 36 failures per device-hour (0.01/s each), down 10 s after each: an alternating
    # renewal process, so each replica fails about horizon / (100 s + 10 s) times.
    reg = fleet(pool("a", cost=1.0, replicas=4, concurrency=4), pool("b", cost=2.0, replicas=2, concurrency=4))
    rng = np.random.default_rng(7)
    n = 20_000
    arrivals = np.cumsum(rng.exponential(0.5, n))  # 2/s for 10,000 s
    traffic = pl.DataFrame({"arrival_ms": (arrivals * 1000).astype(np.int64), "in_tokens": 0,
                            "out_tokens": rng.integers(50, 300, n)})
    cand = Candidate(name="t", policy="cost_min",
                     faults=planted(a=PoolFaults(failures_per_device_hour=36.0, repair_s=10.0)))
    s = run_replay(cand, traffic, reg, 3).summary
    horizon = float(arrivals[-1] - arrivals[0])
    expected = 4 * horizon / 110.0
    assert abs(s.failures["a"] - expected) < 4 * math.sqrt(expected), (s.failures, expected)
    assert s.failures["b"] == 0
    assert s.retried > 0 and s.work_lost_tokens > 0
    assert s.served + s.rejected + s.still_queued == s.requests == n
    assert s.served == n  # every lost request was served on its retry


def test_a_throttled_pool_runs_at_the_time_averaged_clock() -> None:
    # Throttled for half its busy time at half its clock: speed 1 - 0.5 + 0.5 x 0.5 = 0.75, so a 1 s decode takes
    # 4/3 s, and 200 requests on 4 slots (50 waves of 1 s) take 200/3 s instead of 50 s.
    reg = fleet(pool("a", concurrency=4))
    slow = planted(a=PoolFaults(throttled_share=0.5, throttled_clock=0.5))
    one = pl.DataFrame({"arrival_ms": [0], "in_tokens": 0, "out_tokens": [100]})
    cand = Candidate(name="t", policy="cost_min", predictor=ORACLE, faults=slow)
    assert run_replay(cand, one, reg, 0).requests["e2e_s"][0] == pytest.approx(4 / 3)
    load = pl.DataFrame({"arrival_ms": [0] * 200, "in_tokens": 0, "out_tokens": [100] * 200})
    busy = run_replay(cand, load, reg, 0).requests
    plain = run_replay(Candidate(name="t", policy="cost_min", predictor=ORACLE), load, reg, 0).requests
    assert float(plain["e2e_s"].max()) == pytest.approx(50.0)  # type: ignore[arg-type]
    assert float(busy["e2e_s"].max()) == pytest.approx(200 / 3)  # type: ignore[arg-type]


def test_faults_off_and_no_faults_give_the_same_rows() -> None:
    reg = fleet(pool("a", cost=1.0, replicas=2, concurrency=2), pool("b", cost=2.0))
    rng = np.random.default_rng(1)
    traffic = pl.DataFrame({"arrival_ms": np.sort(rng.integers(0, 600_000, 3000)), "in_tokens": 10,
                            "out_tokens": rng.integers(1, 400, 3000)})
    telemetry = pl.DataFrame({"pool": ["a"], "hours": [48], "device_hours": [96.0], "fatal_events": [40.0],
                              "devices_lost": [8], "busy_minutes": [100], "throttled_minutes": [50],
                              "throttled_clock": [0.6]})
    none = run_replay(Candidate(name="t", policy="sla_cost", predictor=ORACLE), traffic, reg, 5)
    off = run_replay(Candidate(name="t", policy="sla_cost", predictor=ORACLE, faults=FaultSpec(mode="off")),
                     traffic, reg, 5, telemetry=telemetry)
    on = run_replay(Candidate(name="t", policy="sla_cost", predictor=ORACLE), traffic, reg, 5, telemetry=telemetry)
    assert off.requests.equals(none.requests)
    assert not on.requests.equals(none.requests)  # the telemetry's failures and throttling do change the run
    assert on.summary.faults["a"]["source"] == "telemetry"


def test_telemetry_figures_by_hand() -> None:
    rows = pl.DataFrame({"pool": ["a", "b"], "hours": [10, 10], "device_hours": [80.0, 0.0],
                         "fatal_events": [3.0, 0.0], "devices_lost": [1, 0], "busy_minutes": [400, 0],
                         "throttled_minutes": [100, 0], "throttled_clock": [0.6, None]})
    got = from_telemetry(rows, 900.0)
    assert got["a"].failures_per_device_hour == pytest.approx(4 / 80)
    assert got["a"].throttled_share == pytest.approx(0.25)
    assert got["a"].speed == pytest.approx(1 - 0.25 + 0.25 * 0.6)
    assert got["a"].replica_rate(8) == pytest.approx(8 * 0.05 / 3600)
    assert got["a"].risk(8, 3600 / 0.4) == pytest.approx(1 - math.exp(-1))
    assert (got["b"].failures_per_device_hour, got["b"].speed) == (0.0, 1.0)
    spec = FaultSpec(pools={"b": PoolFaults(failures_per_device_hour=1.0)})
    mixed = resolve(spec, ["a", "b", "c"], rows)
    assert (mixed["a"].source, mixed["b"].source, mixed["c"].source) == ("telemetry", "candidate", "none")
    assert mixed["b"].repair_s == 900.0
    assert resolve(FaultSpec(mode="off"), ["a"], rows)["a"] == PoolFaultModel(0.0, 900.0, 0.0, 1.0, "none")


def test_the_gate_flags_moving_long_requests_onto_an_unstable_pool() -> None:
    # Pool a is cheap and fails every 3 minutes per replica on average (20 per device-hour), down 60 s each time.
    # The baseline keeps requests whose failure risk there is over 1 % (the 30 s ones: 1 - exp(-30/180) = 15 %)
    # on b; the candidate sends everything that meets the SLA to a, and loses long requests to failures.
    reg = fleet(pool("a", cost=1.0, replicas=2, concurrency=8), pool("b", cost=3.0, replicas=2, concurrency=8))
    rng = np.random.default_rng(11)
    n = 3600
    long = rng.random(n) < 0.3
    traffic = pl.DataFrame({"arrival_ms": np.sort(rng.integers(0, 3_600_000, n)), "in_tokens": 0,
                            "out_tokens": np.where(long, 3000, 50), "sla_tier": "standard"})
    tiers = {"standard": SlaTier(ttft_s=5.0, e2e_s=40.0)}
    faults = planted(a=PoolFaults(failures_per_device_hour=20.0, repair_s=60.0))
    wary = Candidate(name="wary", policy="sla_cost", policy_options={"max_failure_risk": ("0.01",)},
                     sla_tiers=tiers, faults=faults, predictor=ORACLE)
    bold = Candidate(name="bold", policy="sla_cost", sla_tiers=tiers, faults=faults, predictor=ORACLE)
    base, cand = run_replay(wary, traffic, reg, 0), run_replay(bold, traffic, reg, 0)
    on_a = lambda r: r.requests.filter(pl.col("out_tokens") == 3000)["pool"].to_list().count("a")  # noqa: E731
    assert on_a(base) < 0.05 * long.sum() < on_a(cand)
    assert cand.summary.retries_missed_sla > base.summary.retries_missed_sla
    verdict = evaluate(Gate(max_sla_violation_increase_pts=0.5), base.summary, cand.summary)
    assert not verdict.passed
    assert any("sla_violation_rate" in r for r in verdict.reasons)


REG = fleet(pool("a"), pool("b"))


@pytest.mark.parametrize(("text", "where", "says"), [
    ("faults: sometimes", "faults", "unknown value 'sometimes'; expected one of: telemetry, off"),
    ("faults: {mode: never}", "faults", "unknown value 'never'"),
    ("faults: {window_days: 0}", "faults.window_days", "must be > 0"),
    ("faults: {pools: {zz: {failures_per_device_hour: 1}}}", "faults.pools.zz", "unknown pool 'zz'; known: a, b"),
    ("faults: {pools: {a: {throttled_share: 1.5}}}", "faults.pools.a.throttled_share", "must be <= 1"),
    ("faults: {pools: {a: {throttled_clock: 0}}}", "faults.pools.a.throttled_clock", "must be > 0"),
    ("faults: {pools: {a: {failures_per_device_hour: -1}}}", "faults.pools.a.failures_per_device_hour",
     "must be >= 0"),
    ("faults: {pools: {a: {mtbf: 3}}}", "faults.pools.a", "mtbf"),
    ("policy: {name: sla_cost, max_failure_risk: 2}", "policy", "between 0 and 1, got '2'"),
    ("policy: {name: cost_min, max_failure_risk: 0.1}", "policy", "takes no options"),
])
def test_bad_fault_settings_name_the_field(text: str, where: str, says: str) -> None:
    body = text if text.startswith("policy") else f"policy: sla_cost\n{text}"
    with pytest.raises(CandidateError) as info:
        load_candidate_text(body, REG, "cand.yaml")  # type: ignore[arg-type]
    message = str(info.value)
    assert "cand.yaml:" in message and where in message and says in message, message


def test_fault_settings_round_trip_through_the_file() -> None:
    text = ("policy: {name: sla_cost, max_failure_risk: 0.002}\n"
            "faults: {window_days: 3, repair_s: 120, pools: {a: {failures_per_device_hour: 0.5, "
            "throttled_share: 0.2, throttled_clock: 0.7}}}\n")
    cand = load_candidate_text(text, REG)  # type: ignore[arg-type]
    assert cand.faults == FaultSpec(window_days=3.0, repair_s=120.0, pools={"a": PoolFaults(0.5, None, 0.2, 0.7)})
    assert cand.policy_options == {"max_failure_risk": ("0.002",)}
    again = load_candidate_text(yaml.safe_dump(candidate_to_dict(cand)), REG)  # type: ignore[arg-type]
    assert again == cand
    assert load_candidate_text("policy: sla_cost\nfaults: off\n", REG).faults.mode == "off"  # type: ignore[arg-type]
