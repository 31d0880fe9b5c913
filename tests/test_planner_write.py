"""`hetpool plan --write`: the best plan as its pool's serving block in a copy of the registry, which `registry
load`, `replay bench` and `replay run` take, reproducing the plan's numbers."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest
import yaml

from pool_registry import load_registry
from replay.planner import Plan, PlanSettings, plan_model, rebase_evidence, serving_block
from tests.cli import run
from tests.conftest import FLEET, REPO


@pytest.fixture
def traffic(tmp_path: Path) -> Path:
    """Two minutes of llama traffic."""
    rng = np.random.default_rng(5)
    n = 400
    arrival = np.cumsum(rng.exponential(1 / 4, n))
    path = tmp_path / "traffic.csv"
    pl.DataFrame({"arrival_ms": np.round(arrival * 1000).astype(np.int64) + 1_735_689_600_000,
                  "in_tokens": rng.integers(100, 3000, n), "out_tokens": rng.integers(10, 300, n),
                  "model": "llama-3.1-70b"}).write_csv(path)
    return path


def test_write_round_trips_through_registry_load_replay_bench_and_replay_run(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, traffic: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HETPOOL_EVIDENCE_ROOT", str(REPO / "examples"))  # the copy's evidence stays in examples/
    out = tmp_path / "planned" / "fleet.yaml"
    out.parent.mkdir()
    code, text, _ = run(capsys, "--json", "plan", "--registry", str(FLEET), "--model", "llama-3.1-70b", "--pool",
                        "gaudi3-a", "--concurrency", "16,32", "--tpot-ms", "30", "--write", str(out))
    assert code == 0
    best = json.loads(text)["plans"][0]
    assert best["meets_targets"] and best["tpot_ms_p50"] <= 30
    written = load_registry(out)
    serving = written.pool("gaudi3-a").serving
    assert serving is not None
    assert (serving.model, serving.replicas, serving.devices_per_replica, serving.pp, serving.max_concurrency) == (
        "llama-3.1-70b", best["replicas"], best["devices_per_replica"], best["pp"], best["concurrency"])
    assert serving.tp == best["tp"]
    assert written.pools[0] == load_registry(FLEET).pools[0]  # the other pools are as they were
    db = str(tmp_path / "db.duckdb")
    code, loaded, err = run(capsys, "--db", db, "registry", "load", str(out))
    assert code == 0, err
    assert "evidence file(s) new" in loaded  # mlu370-a's evidence files are still found from the copy
    code, text, _ = run(capsys, "--db", db, "--json", "replay", "bench", "--pool", "gaudi3-a", "--concurrency",
                        str(best["concurrency"]), "--isl", "1024", "--osl", "128")
    bench = json.loads(text)[0]
    assert code == 0
    assert (bench["ttft_ms_p50"], bench["tpot_ms_p50"]) == (best["ttft_ms_p50"], best["tpot_ms_p50"])
    assert bench["output_tok_s"] / best["devices_per_replica"] == best["output_tok_s_per_device"]
    code, text, err = run(capsys, "--db", db, "--json", "replay", "run", "--traffic", str(traffic), "--candidate",
                          str(REPO / "examples" / "candidates" / "round_robin.yaml"))
    assert code == 0, err
    summary = json.loads(text)
    assert summary["candidate"]["requests"] == 400
    pools = summary["candidate"]["pools"]
    assert pools["gaudi3-a"]["requests"] > 0  # round robin sends the planned pool its share
    assert pools["gaudi3-a"]["provisioned_cost_usd"] > 0


def test_the_serving_block_keeps_the_engine_and_the_evidence_paths_follow_the_copy(tmp_path: Path) -> None:
    fleet = load_registry(FLEET)
    report = plan_model(fleet, "qwen3-235b-a22b", ("mi300x-a",), PlanSettings(concurrency=(200,)))
    plan: Plan = next(p for p in report.plans if p.fits and p.layout.ep > 1)
    block = serving_block(fleet.pool("mi300x-a"), report.model, plan)
    assert block["engine"] == "sglang" and block["ep"] == plan.layout.ep
    assert block["max_num_batched_tokens"] == 8192 and block["max_concurrency"] == 200
    data = yaml.safe_load(FLEET.read_text())
    moved = rebase_evidence(data, FLEET.parent, tmp_path)
    checks = next(p for p in moved["pools"] if p["id"] == "mlu370-a")["onboarding"]["checks"]
    assert (tmp_path / checks["operators"]["file"]).resolve() == (FLEET.parent / "onboarding" / "mlu370-a" /
                                                                  "operators.csv").resolve()
    assert checks["devices"] == data["pools"][4]["onboarding"]["checks"]["devices"]  # a sign-off has no file
