"""A `hetpool plan --json` report as evidence of the parallelism item: "a plan meets the MFU target"."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from onboarding.evidence import parse_evidence
from onboarding.exceptions import EvidenceError
from onboarding.gates import FAIL, PASS
from onboarding.plan_report import judge_plan, parse_plan_report
from pool_registry import Registry
from tests.cli import run
from tests.conftest import FLEET


def plan_json(capsys: pytest.CaptureFixture[str], tmp_path: Path, *argv: str) -> Path:
    code, out, _ = run(capsys, "--json", "plan", "--registry", str(FLEET), *argv)
    assert code in (0, 1)
    path = tmp_path / "plan.json"
    path.write_text(out)
    return path


def best_mfu(report: dict, pool: str, active_b: float, peak_tflops: float) -> float:
    """By hand: the best output tokens/s per device of the pool's meeting plans x 2 x active params / peak."""
    speeds = [p["output_tok_s_per_device"] for p in report["plans"] if p["pool"] == pool and p["fits"]
              and p["meets_targets"]]
    return max(speeds) * 2 * active_b * 1e9 / (peak_tflops * 1e12)


def test_a_plan_judges_the_parallelism_item(fleet_db: Path, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    path = plan_json(capsys, tmp_path, "--model", "qwen3-30b-a3b", "--pool", "mlu370-a", "--tpot-ms", "60")
    db = ["--db", str(fleet_db)]
    code, out, err = run(capsys, *db, "onboarding", "add-evidence", "mlu370-a", "parallelism", str(path))
    assert code == 0, err
    code, out, _ = run(capsys, *db, "--json", "onboarding", "mlu370-a")
    item = next(i for i in json.loads(out)[0]["items"] if i["id"] == "parallelism")
    mfu = best_mfu(json.loads(path.read_text()), "mlu370-a", 3.3, 96)  # qwen3-30b-a3b on MLU370-X8
    assert mfu < 0.3 and item["status"] == FAIL
    assert re.search(rf"plan of qwen3-30b-a3b: tp\d+ pp\d+.* at concurrency \d+ fits and meets its targets with MFU "
                     rf"{mfu:.3f} \(output tokens' FLOPs per device\), target 0.3", str(item["reason"]))


def test_the_mfu_target_decides(fleet: Registry, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = plan_json(capsys, tmp_path, "--model", "llama-3.1-70b", "--pool", "h100-a", "--concurrency", "64")
    frame = parse_evidence("parallelism", path.read_text(), "plan.json")
    mfu = best_mfu(json.loads(path.read_text()), "h100-a", 70.6, 989)
    pool = fleet.pool("h100-a")
    assert judge_plan(frame, fleet, pool, mfu).status == PASS
    assert judge_plan(frame, fleet, pool, mfu * 1.01).status == FAIL
    other = judge_plan(frame, fleet, fleet.pool("gaudi3-a"), 0.01)
    assert other.status == FAIL and "has no layout of gaudi3-a that fits and meets its targets" in other.reason


def test_measured_points_still_read_as_before() -> None:
    frame = parse_evidence("parallelism", "devices,mfu\n8,0.41\n", "p.csv")
    assert frame.columns == ["line", "devices", "mfu"]


@pytest.mark.parametrize(("text", "message"), [
    ("{", "plan.json:1:2: not JSON"),
    ('{"plans": []}', "expected the JSON object 'hetpool plan --json' prints"),
    ('{"model": "m", "plans": [{"pool": "p"}]}', "plans[0]: expected pool, whole numbers"),
    ('{"model": "m", "plans": [{"pool": "p", "tp": 1, "pp": 1, "ep": 1, "devices_per_replica": 1, '
     '"concurrency": 1, "fits": true, "meets_targets": true, "output_tok_s_per_device": "fast"}]}',
     "plans[0].output_tok_s_per_device: expected a number >= 0 or null, got 'fast'"),
])
def test_a_malformed_plan_is_refused_with_what_is_wrong(text: str, message: str) -> None:
    with pytest.raises(EvidenceError, match=re.escape(message)):
        parse_plan_report(text, "plan.json")


def test_a_plan_of_a_model_the_registry_does_not_know(fleet: Registry) -> None:
    frame = parse_plan_report('{"model": "gone", "plans": [{"pool": "h100-a", "tp": 1, "pp": 1, "ep": 1, '
                              '"devices_per_replica": 1, "concurrency": 1, "fits": true, "meets_targets": true, '
                              '"output_tok_s_per_device": 100.0}]}', "plan.json")
    out = judge_plan(frame, fleet, fleet.pool("h100-a"), 0.3)
    assert out.status == FAIL and "unknown model 'gone'" in out.reason
