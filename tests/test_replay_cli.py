"""hetpool replay run/calibrate/sweep end to end on a real DuckDB file."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from pool_registry import Registry
from replay import Candidate, PoolOverride, closed_loop, default_requests, load_candidate, run_replay
from replay.fleet import resolve_pools
from store import connect, require_registry
from store.replay_runs import get_replay_run, list_replay_runs
from tests.cli import run
from tests.conftest import REPO

CANDIDATES = REPO / "examples" / "candidates"
GATE = REPO / "examples" / "gate.yaml"


@pytest.fixture
def traffic_csv(tmp_path: Path) -> Path:
    """Four minutes of llama traffic heavy enough that routing choices show in cost and latency."""
    rng = np.random.default_rng(3)
    n = 3000
    arrival = np.cumsum(rng.exponential(1 / 12.5, n))
    frame = pl.DataFrame({"arrival_ms": np.round(arrival * 1000).astype(np.int64) + 1_735_689_600_000,
                          "in_tokens": rng.integers(100, 6000, n), "out_tokens": rng.integers(10, 600, n),
                          "model": "llama-3.1-70b"})
    path = tmp_path / "traffic.csv"
    frame.write_csv(path)
    return path


def test_run_with_baseline_and_gate_saves_the_run(capsys: pytest.CaptureFixture[str], fleet_db: Path,
                                                  traffic_csv: Path, tmp_path: Path) -> None:
    db = str(fleet_db)
    assert run(capsys, "--db", db, "ingest", "traffic", str(traffic_csv))[0] == 0
    out_dir = tmp_path / "out"
    code, out, _ = run(capsys, "--db", db, "--json", "replay", "run", "--candidate", str(CANDIDATES / "sla_cost.yaml"),
                       "--baseline", str(CANDIDATES / "round_robin.yaml"), "--gate", str(GATE), "--out", str(out_dir))
    data = json.loads(out)
    assert code == 0 and data["verdict"] == "pass" and data["reasons"] == []
    assert data["candidate"]["requests"] == data["baseline"]["requests"] == 3000
    assert data["candidate"]["busy_cost_usd"] < data["baseline"]["busy_cost_usd"]
    rows = pl.read_parquet(out_dir / "requests.parquet")
    assert rows.height == 3000 and rows["cost_usd"].sum() == pytest.approx(data["candidate"]["busy_cost_usd"])
    assert json.loads((out_dir / "summary.json").read_text())["run_id"] == data["run_id"]
    con = connect(fleet_db, read_only=True)
    try:
        saved = get_replay_run(con, data["run_id"])
        assert list_replay_runs(con).height == 1
    finally:
        con.close()
    assert saved is not None
    assert saved["verdict"] == "pass" and saved["candidate"]["policy"] == "sla_cost"
    assert saved["summary"]["baseline"]["policy"] == "round_robin"
    assert saved["summary"]["candidate"]["served"] == 3000


def test_a_gate_failure_exits_1_with_reasons(capsys: pytest.CaptureFixture[str], fleet_db: Path,
                                             traffic_csv: Path) -> None:
    code, out, _ = run(capsys, "--db", str(fleet_db), "replay", "run", "--traffic", str(traffic_csv),
                       "--candidate", str(CANDIDATES / "round_robin.yaml"),
                       "--baseline", str(CANDIDATES / "sla_cost.yaml"), "--gate", str(GATE))
    assert code == 1
    assert "gate: FAIL" in out
    assert any(line.strip().startswith("FAIL busy cost rose") for line in out.splitlines())
    con = connect(fleet_db, read_only=True)
    try:
        saved = list_replay_runs(con).row(0, named=True)
    finally:
        con.close()
    assert saved["verdict"] == "fail" and "busy cost rose" in json.loads(saved["reasons"])[0]


@pytest.mark.parametrize(("argv", "message"), [
    (["--gate", "G"], "hetpool: error: --gate compares against a baseline; pass --baseline FILE too"),
    (["--traffic", "T", "--trace", "x"], "hetpool: error: --traffic replays a file; --trace, --start and --end"),
    (["--start", "2030-01-01"], "hetpool: error: no stored requests from 2030-01-01;"),
    (["--start", "soon"], "hetpool: error: --start 'soon': expected an ISO 8601 time"),
])
def test_user_errors_are_one_line_and_exit_2(capsys: pytest.CaptureFixture[str], fleet_db: Path,
                                             traffic_csv: Path, argv: list[str], message: str) -> None:
    argv = [str(GATE) if a == "G" else str(traffic_csv) if a == "T" else a for a in argv]
    code, _, err = run(capsys, "--db", str(fleet_db), "replay", "run", "--candidate",
                       str(CANDIDATES / "sla_cost.yaml"), *argv)
    assert code == 2 and err.startswith(message) and len(err.strip().splitlines()) == 1


def test_an_undefined_sla_tier_is_named(capsys: pytest.CaptureFixture[str], fleet_db: Path, traffic_csv: Path) -> None:
    code, _, err = run(capsys, "--db", str(fleet_db), "replay", "run", "--traffic", str(traffic_csv),
                       "--sla-tier", "gold", "--candidate", str(CANDIDATES / "sla_cost.yaml"))
    assert code == 2
    assert "traffic uses SLA tier 'gold' that candidate 'sla-cost' does not define; defined: batch, premium, " \
           "standard" in err


@pytest.mark.slow  # a calibration over stored requests
def test_calibrate_from_stored_observations(capsys: pytest.CaptureFixture[str], fleet_db: Path, fleet: Registry,
                                            tmp_path: Path) -> None:
    # Observations on h100-a made by the model itself at mfu 0.30, mem_bw_eff 0.60 and 5 ms per pass, with 3 %
    # measurement noise; the registry says 0.45, 0.75 and 0 ms.
    rng = np.random.default_rng(1)
    n = 1500
    traffic = pl.DataFrame({"arrival_ms": np.cumsum(rng.exponential(400, n)).astype(np.int64) + 1_735_689_600_000,
                            "in_tokens": rng.integers(50, 6000, n), "out_tokens": rng.integers(2, 400, n),
                            "model": "llama-3.1-70b", "obs_pool": "h100-a"})
    planted = Candidate(name="p", policy="observed", pools={"h100-a": PoolOverride(
        mfu=0.30, mem_bw_eff=0.60, step_overhead_ms=5.0)})
    rows = run_replay(planted, traffic, fleet, 0).requests
    ttft = rows["ttft_s"].to_numpy() * rng.lognormal(0, 0.03, n)
    tpot = rows["tpot_s"].to_numpy() * rng.lognormal(0, 0.03, n)
    obs = tmp_path / "observed.csv"
    traffic.with_columns(pl.Series("obs_ttft_s", ttft), pl.Series("obs_e2e_s", ttft + tpot * (
        traffic["out_tokens"].to_numpy() - 1))).write_csv(obs)
    assert run(capsys, "--db", str(fleet_db), "ingest", "traffic", str(obs))[0] == 0
    out_file = tmp_path / "calibrated.yaml"
    code, out, _ = run(capsys, "--db", str(fleet_db), "replay", "calibrate", "--trace", "observed.csv",
                       "--base", str(CANDIDATES / "sla_cost.yaml"), "--out", str(out_file))
    assert code == 0 and f"wrote {out_file}" in out
    con = connect(fleet_db, read_only=True)
    try:
        registry = require_registry(con)
    finally:
        con.close()
    cand = load_candidate(out_file, registry)
    assert cand.policy == "sla_cost" and set(cand.sla_tiers) == {"standard", "premium", "batch"}  # the base's
    fit = cand.pools["h100-a"]
    assert fit.mfu == pytest.approx(0.30, rel=0.05)
    # A trace pins a lone decode pass, the weights at the sustained bandwidth plus the engine's time per step (the
    # hops' 2 ms are the NVLink's declared latency, not fitted); how the pass splits into the two shows only in how
    # passes grow with batch and context, which a trace of rough replayed times pins loosely (as in
    # tests/test_demo_replay.py: the bandwidth within 10 %, the overhead within 40 %)
    weights_s = 70.6e9 * 2 / (3.35e12 * 4)
    assert weights_s / fit.mem_bw_eff + fit.step_overhead_ms / 1000 == pytest.approx(  # type: ignore[operator]
        weights_s / 0.60 + 5.0 / 1000, rel=0.01)
    assert fit.mem_bw_eff == pytest.approx(0.60, rel=0.10)
    assert fit.step_overhead_ms == pytest.approx(5.0, rel=0.40)
    assert out_file.read_text().startswith("# Calibrated from stored requests of trace 'observed.csv'")


def test_sweep_prints_the_front(capsys: pytest.CaptureFixture[str], fleet_db: Path, traffic_csv: Path,
                                tmp_path: Path) -> None:
    grid = tmp_path / "grid.yaml"
    grid.write_text("parameters:\n  policy: [sla_cost, round_robin]\n  pools.gaudi3-a.replicas: [1, 8]\n")
    code, out, _ = run(capsys, "--db", str(fleet_db), "--json", "replay", "sweep", "--traffic", str(traffic_csv),
                       "--candidate", str(CANDIDATES / "sla_cost.yaml"), "--grid", str(grid),
                       "--out", str(tmp_path / "sweep.csv"))
    points = json.loads(out)["points"]
    assert code == 0 and len(points) == 4 and any(p["pareto"] for p in points)
    assert [p["busy_cost_usd"] for p in points] == sorted(p["busy_cost_usd"] for p in points)
    assert pl.read_csv(tmp_path / "sweep.csv").height == 4


def test_calibrate_from_a_benchmark_table_alone(capsys: pytest.CaptureFixture[str], fleet_db: Path,
                                                fleet: Registry, tmp_path: Path) -> None:
    planted = Candidate(name="p", pools={"gaudi3-a": PoolOverride(mfu=0.33, mem_bw_eff=0.55, step_overhead_ms=6.0)})
    spec = next(s for s in resolve_pools(fleet, planted) if s.id == "gaudi3-a")
    lines = ["pool,isl,osl,concurrency,ttft_ms,tpot_ms"]
    for isl in (256, 2048):
        for c in (1, 4, 16):
            p = closed_loop(spec, c, isl, 128, default_requests(c))
            lines.append(f"gaudi3-a,{isl},128,{c},{p.ttft_ms_p50:.3f},{p.tpot_ms_p50:.4f}")
    table = tmp_path / "bench.csv"
    table.write_text("\n".join(lines) + "\n")
    out_file = tmp_path / "fit.yaml"
    code, out, _ = run(capsys, "--db", str(fleet_db), "replay", "calibrate", "--no-requests", "--bench", str(table),
                       "--out", str(out_file))
    assert code == 0 and "gaudi3-a" in out
    fitted = load_candidate(out_file, fleet).pools["gaudi3-a"]
    assert fitted.mfu == pytest.approx(0.33, rel=0.05) and fitted.mem_bw_eff == pytest.approx(0.55, rel=0.05)
    # with nothing stored, the table alone is fitted without --no-requests, and each coefficient is reported
    code, out, err = run(capsys, "--db", str(fleet_db), "replay", "calibrate", "--bench", str(table),
                         "--out", str(out_file))
    assert code == 0, err
    assert "no stored requests: fitting the benchmark table alone" in err
    assert "    mfu 0.33" in out and "(fitted, ±" in out
    assert "collective_us 0 (not identifiable" in out
    # --pool: the chosen pools alone; one unknown, or one with no evidence, is one line and exit 2
    code, out, _ = run(capsys, "--db", str(fleet_db), "--json", "replay", "calibrate", "--no-requests", "--bench",
                       str(table), "--pool", "gaudi3-a", "--out", str(out_file))
    assert code == 0 and [f["pool"] for f in json.loads(out)["fits"]] == ["gaudi3-a"]
    code, _, err = run(capsys, "--db", str(fleet_db), "replay", "calibrate", "--no-requests", "--bench", str(table),
                       "--pool", "h100-z", "--out", str(out_file))
    assert code == 2 and err.strip().startswith("hetpool: error: unknown pool 'h100-z' to calibrate; replayable: ")
    code, _, err = run(capsys, "--db", str(fleet_db), "replay", "calibrate", "--no-requests", "--bench", str(table),
                       "--pool", "h100-a", "--out", str(out_file))
    assert code == 2 and err.strip() == ("hetpool: error: nothing to calibrate h100-a from: no observed requests and "
                                         "no benchmark rows of these pools")
    table.write_text("pool,isl,osl,concurrency,ttft_ms,tpot_ms\ngaudi3-a,256,128,4,12.5,x\n")
    code, _, err = run(capsys, "--db", str(fleet_db), "replay", "calibrate", "--no-requests", "--bench", str(table),
                       "--out", str(out_file))
    assert code == 2 and err.strip() == f"hetpool: error: {table}:2: column tpot_ms: expected a number, got 'x'"


ORACLE = "oracle: an upper bound, not achievable by a router"


def test_the_oracle_gap_and_the_oracles_label(capsys: pytest.CaptureFixture[str], fleet_db: Path,
                                              traffic_csv: Path, tmp_path: Path) -> None:
    db = str(fleet_db)
    assert run(capsys, "--db", db, "ingest", "traffic", str(traffic_csv))[0] == 0
    # a window of stored requests: the online predictor starts from the requests stored before it
    window = ["--start", "2025-01-01T00:02:00Z"]
    code, out, err = run(capsys, "--db", db, "replay", "run", "--candidate", str(CANDIDATES / "sla_cost.yaml"),
                         "--oracle-gap", *window)
    assert code == 0 and "the predictor starts from the 1,464 requests stored before it" in err
    lines = out.splitlines()
    assert next(line for line in lines if line.startswith("predictor ")).split() == ["predictor", "online"]
    assert any(line.startswith("out error p50/p90") for line in lines)
    assert any(line.startswith("oracle gap: what knowing every output length would change (online -> oracle; "
                               f"{ORACLE})") for line in lines)
    assert [line.split()[:2] for line in lines if line.startswith("  ") and "->" in line] == [
        ["busy", "cost"], ["ttft", "p99"], ["sla", "violations"]]
    assert lines[-1] == f"note: {ORACLE}"
    code, out, _ = run(capsys, "--db", db, "--json", "replay", "run", "--candidate",
                       str(CANDIDATES / "sla_cost.yaml"), "--oracle-gap", *window)
    data = json.loads(out)
    assert data["notes"] == [ORACLE] and data["history_requests"] == 1464
    assert data["candidate"]["predictor"] == "online" and data["candidate"]["predictor_note"] == ""
    gap = data["oracle_gap"]
    assert gap["note"] == ORACLE and gap["oracle"]["predictor_note"] == ORACLE
    assert set(gap) >= {"busy_cost_usd", "ttft_p99", "sla_violation_rate"}
    con = connect(fleet_db, read_only=True)
    try:
        saved = get_replay_run(con, data["run_id"])
    finally:
        con.close()
    assert saved is not None and saved["summary"]["oracle"]["predictor_note"] == ORACLE
    # a candidate that reads the true lengths says so in its table and its JSON
    knowing = tmp_path / "knowing.yaml"
    knowing.write_text((CANDIDATES / "sla_cost.yaml").read_text() + "predictor: oracle\n")
    code, out, _ = run(capsys, "--db", db, "replay", "run", "--candidate", str(knowing))
    assert code == 0 and out.splitlines()[-1] == f"note: {ORACLE}"
    code, out, _ = run(capsys, "--db", db, "--json", "replay", "run", "--candidate", str(knowing))
    assert json.loads(out)["candidate"]["predictor_note"] == ORACLE and json.loads(out)["notes"] == [ORACLE]
    # and a gate refuses to compare it with a candidate that predicts
    code, out, _ = run(capsys, "--db", db, "replay", "run", "--candidate", str(CANDIDATES / "sla_cost.yaml"),
                       "--baseline", str(knowing), "--gate", str(GATE))
    assert code == 1 and "  FAIL predictors differ: candidate 'online', baseline 'oracle'" in out


def test_a_store_of_several_traces_replays_the_newest_and_names_the_others(
        capsys: pytest.CaptureFixture[str], fleet_db: Path, traffic_csv: Path, tmp_path: Path) -> None:
    db = str(fleet_db)
    later = tmp_path / "later.csv"  # the same shape of traffic a year on, 500 requests of it
    frame = pl.read_csv(traffic_csv).head(500)
    frame.with_columns(pl.col("arrival_ms") + 365 * 86_400_000).write_csv(later)
    for path in (traffic_csv, later):
        assert run(capsys, "--db", db, "ingest", "traffic", str(path))[0] == 0
    candidate = str(CANDIDATES / "sla_cost.yaml")
    code, out, _ = run(capsys, "--db", db, "replay", "run", "--candidate", candidate)
    lines = out.splitlines()
    assert code == 0
    assert lines[0].endswith(": stored requests of trace 'later.csv' (500 requests arriving 2026-01-01 00:00 to "
                             "2026-01-01 00:00 UTC)")
    assert lines[1] == ("  (the store holds 2 traces; replaying 'later.csv', the one with the newest requests; the "
                        "others: 'traffic.csv' (3,000 requests, 2025-01-01 00:00 to 2025-01-01 00:03); pick one "
                        "with --trace NAME)")
    assert next(line for line in lines if line.startswith("requests ")).split() == ["requests", "500"]
    code, out, _ = run(capsys, "--db", db, "--json", "replay", "run", "--candidate", candidate, "--trace",
                       "traffic.csv")
    data = json.loads(out)
    assert code == 0 and data["candidate"]["requests"] == 3000 and data["traffic_notes"] == []
    assert data["traffic"].startswith("stored requests of trace 'traffic.csv' (3,000 requests")
    code, out, err = run(capsys, "--db", db, "replay", "run", "--candidate", candidate, "--trace", "nope")
    assert code == 2 and out == "" and err.strip() == ("hetpool: error: unknown trace 'nope'; stored: later.csv, "
                                                      "traffic.csv")
