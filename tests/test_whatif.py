"""The what-if workflow the CLI and the console share: same traffic, same seed, the gate, the words."""

from __future__ import annotations

import dataclasses

import polars as pl
import pytest

from pool_registry import Registry
from replay import Candidate, Gate, ParseOptions, ReplayError, SlaTier, parse_traffic, run_replay
from replay.candidate import PredictorSpec
from replay.predictors import ORACLE_NOTE
from replay.whatif import file_traffic, run_whatif, stored_traffic

TIERS = {"standard": SlaTier(ttft_s=2.0, e2e_s=60.0)}


@pytest.fixture
def traffic() -> pl.DataFrame:
    n = 600
    return pl.DataFrame({"arrival_ms": [1_735_689_600_000 + 100 * k for k in range(n)],
                         "in_tokens": [200 + (k * 37) % 3000 for k in range(n)],
                         "out_tokens": [20 + (k * 13) % 300 for k in range(n)], "model": "llama-3.1-70b"})


def test_candidate_and_baseline_run_on_the_same_traffic_and_seed(fleet: Registry, traffic: pl.DataFrame) -> None:
    cand = Candidate(name="cheap", policy="cost_min", sla_tiers=TIERS)
    base = Candidate(name="rr", policy="round_robin", sla_tiers=TIERS)
    seen: list[tuple[float, str]] = []
    w = run_whatif(cand, stored_traffic(traffic, trace="t"), fleet, baseline=base, seed=5,
                   gate=Gate(max_cost_increase_pct=0.0), progress=lambda f, what: seen.append((f, what)))
    assert w.summary == run_replay(cand, traffic, fleet, 5).summary
    assert w.base_summary == run_replay(base, traffic, fleet, 5).summary
    assert w.verdict is not None and w.verdict.passed and not w.failed
    assert [f for f, _ in seen] == [0.0, 0.5, 1.0] and "under the baseline 'rr'" in seen[1][1]
    lines = w.report_lines()
    assert lines[0].split() == ["cheap", "rr"] and lines[-1].startswith("  ok   provisioned cost")
    record = w.run_record("a name", "a note")
    assert record["name"] == "a name" and record["summary"] == w.summary.to_dict()
    assert record["traffic_spec"] == {"kind": "stored", "trace": "t", "start_ms": None, "end_ms": None}
    assert record["gate"] == {"max_cost_increase_pct": 0.0} and record["verdict"] == "pass"
    failed = run_whatif(base, stored_traffic(traffic), fleet, baseline=cand, gate=Gate(max_cost_increase_pct=0.0))
    assert failed.failed and failed.data()["reasons"][0].startswith("busy cost rose")


def test_a_gate_needs_a_baseline_and_empty_windows_say_what_to_do(fleet: Registry, traffic: pl.DataFrame) -> None:
    with pytest.raises(ReplayError, match="a gate compares against a baseline"):
        run_whatif(Candidate(name="c"), stored_traffic(traffic), fleet, gate=Gate(max_cost_increase_pct=1))
    with pytest.raises(ReplayError, match=r"^no stored requests of trace 'x' from 2030; load some with"):
        stored_traffic(traffic.clear(), trace="x", start="2030")


def test_a_file_names_its_format_count_and_first_reject() -> None:
    data = b"TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68,374,44\nnot a time,1,2\n"
    fmt, parsed = parse_traffic(data, "azure.csv", "auto", ParseOptions(model="llama-3.1-70b"))
    t = file_traffic("azure.csv", fmt, parsed)
    assert t.described == "file azure.csv (azure, 1 requests)"
    assert t.notes == ("azure.csv: 1 rows rejected, first: line 3: unparseable TIMESTAMP 'not a time': expected "
                       "YYYY-MM-DD HH:MM:SS.fffffff",)
    assert t.spec == {"kind": "file", "name": "azure.csv", "format": "azure"}


def test_the_oracle_gap_and_its_label(fleet: Registry, traffic: pl.DataFrame) -> None:
    cand = Candidate(name="cheap", policy="sla_cost", sla_tiers=TIERS)
    history = traffic.select("in_tokens", "out_tokens", "model").with_columns(pl.col("out_tokens") * 3)
    w = run_whatif(cand, stored_traffic(traffic, history=history), fleet, seed=2, oracle_gap=True)
    assert w.history == 600 and w.summary == run_replay(cand, traffic, fleet, 2, history).summary
    oracle = run_replay(dataclasses.replace(cand, predictor=PredictorSpec("oracle")), traffic, fleet, 2).summary
    assert w.oracle_summary == oracle
    gap = w.data()["oracle_gap"]
    assert gap["note"] == ORACLE_NOTE == "oracle: an upper bound, not achievable by a router"
    assert gap["busy_cost_usd"] == {"predictor": w.summary.busy_cost_usd, "oracle": oracle.busy_cost_usd,
                                    "change_pct": pytest.approx((oracle.busy_cost_usd / w.summary.busy_cost_usd
                                                                 - 1) * 100)}
    assert gap["sla_violation_rate"]["change_pts"] == pytest.approx(
        (oracle.sla_violation_rate - w.summary.sla_violation_rate) * 100)
    assert gap["oracle"]["predictor"] == "oracle" and w.data()["notes"] == [ORACLE_NOTE]
    lines = w.report_lines()
    assert lines[-1] == f"note: {ORACLE_NOTE}"
    assert any(line.startswith("oracle gap: what knowing every output length would change (online -> oracle")
               for line in lines)
    assert next(line for line in lines if line.startswith("predictor")).split() == ["predictor", "online"]
    record = w.run_record()
    assert record["oracle_summary"]["predictor_note"] == ORACLE_NOTE
    plain = run_whatif(cand, stored_traffic(traffic), fleet)
    assert plain.data()["notes"] == [] and "oracle_gap" not in plain.data()
    assert not any("oracle" in line for line in plain.report_lines())
    assert plain.run_record()["oracle_summary"] is None
