"""A `hetpool check --json` report as the metrics item's evidence before telemetry flows, and the Onboarding page's
list of the families a new exporter delivers that no profile maps."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from app.commands.check import check
from app.console import onboarding_data
from onboarding.check_report import judge_report, parse_check_report
from onboarding.exceptions import EvidenceError
from onboarding.gates import FAIL, PASS, PENDING
from pool_registry import load_registry
from store import ENV_DB
from tests.cli import run
from tests.conftest import FLEET, REPO

DCGM = REPO / "examples" / "exporters" / "dcgm-h100-a-01.prom"
NEW_EXPORTER = "\n".join([
    'DCGM_FI_DEV_GPU_UTIL{gpu="0",Hostname="h1"} 40',
    'acme_npu_hbm_used_bytes{npu="0"} 1e9',
    'acme_npu_link_errors{npu="0"} 0',
]) + "\n"


def open_page(db: Path, monkeypatch: pytest.MonkeyPatch, page: str) -> AppTest:
    monkeypatch.setenv(ENV_DB, str(db))
    at = AppTest.from_file(str(REPO / "app" / "console" / "main.py"), default_timeout=60).run()
    return at.switch_page(page).run()


def report(tmp_path: Path, text: str | None = None) -> Path:
    source = DCGM
    if text is not None:
        source = tmp_path / "exporter.prom"
        source.write_text(text)
    path = tmp_path / "check.json"
    path.write_text(json.dumps(check(str(source))))
    return path


def test_a_valid_complete_report_passes(tmp_path: Path) -> None:
    got = judge_report(parse_check_report(report(tmp_path).read_text()), 5)
    assert got.status == PASS and got.at_ms == 5
    assert got.reason == f"check report of {DCGM}: valid prometheus, every core metric delivered by 8 families"


def test_missing_metrics_unmapped_families_and_errors_fail(tmp_path: Path) -> None:
    parsed = parse_check_report(report(tmp_path, NEW_EXPORTER).read_text())
    assert parsed.unmapped.get_column("name").to_list() == ["acme_npu_hbm_used_bytes", "acme_npu_link_errors"]
    got = judge_report(parsed, None)
    assert got.status == FAIL and got.reason.endswith(
        "missing accelerator.memory.used, accelerator.memory.total, accelerator.power, accelerator.temperature; "
        "not mapped by any profile: acme_npu_hbm_used_bytes, acme_npu_link_errors")
    line = len(DCGM.read_text().splitlines()) + 1
    broken = judge_report(parse_check_report(report(tmp_path, DCGM.read_text() + "x y\n").read_text()), None)
    assert broken.status == FAIL and f"1 exposition error(s), for example line {line} [value]: bad value 'y'" in \
        broken.reason


@pytest.mark.parametrize(("text", "message"), [
    ("{", "check.json:1:2: not JSON"),
    ("[]", "expected the JSON object"),
    ('{"format": "prometheus"}', "field 'valid' is missing or not a bool"),
    ('{"format": "text", "valid": true}', "format 'text'"),
    ('{"format": "prometheus", "valid": true, "errors": [{"line": 1}], "missing_core": [], "families": []}',
     "valid is true with 1 error(s)"),
    ('{"format": "prometheus", "valid": true, "errors": [], "missing_core": [], "families": [{"name": "a"}]}',
     "families[0] has no name or status"),
])
def test_a_malformed_report_is_refused_with_what_is_wrong(text: str, message: str) -> None:
    with pytest.raises(EvidenceError, match=re.escape(message)):
        parse_check_report(text, "check.json")


def test_the_report_judges_the_metrics_item_until_telemetry_flows(
        fleet_db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = ["--db", str(fleet_db)]

    def metrics_item() -> dict[str, object]:
        code, out, _ = run(capsys, *db, "--json", "onboarding", "mlu370-a")
        assert code == 0
        return next(i for i in json.loads(out)[0]["items"] if i["id"] == "metrics")

    assert metrics_item()["status"] == PENDING
    bad = report(tmp_path, NEW_EXPORTER)
    code, out, _ = run(capsys, *db, "onboarding", "add-evidence", "mlu370-a", "metrics", str(bad))
    assert code == 0 and "checked and stored" in out
    item = metrics_item()
    assert item["status"] == FAIL and "not mapped by any profile: acme_npu_hbm_used_bytes" in str(item["reason"])
    assert item["files"] == [{"role": "report", "name": str(bad)}]
    detail = onboarding_data.onboarding_detail(str(fleet_db), "mlu370-a")
    assert detail["unmapped"].get_column("name").to_list() == ["acme_npu_hbm_used_bytes", "acme_npu_link_errors"]
    good = report(tmp_path)
    assert run(capsys, *db, "onboarding", "add-evidence", "mlu370-a", "metrics", str(good), "--at",
               "2026-11-25")[0] == 0
    item = metrics_item()
    assert item["status"] == PASS and item["at_ms"] == 1_795_564_800_000
    csv = tmp_path / "x.csv"
    csv.write_text("op,max_abs_err,tol\n")
    code, _, err = run(capsys, *db, "onboarding", "add-evidence", "mlu370-a", "metrics", str(csv))
    assert code == 2 and "not JSON" in err


def test_the_registry_can_name_a_report(tmp_path: Path) -> None:
    fleet = tmp_path / "fleet.yaml"
    shutil.copy(FLEET, fleet)
    text = fleet.read_text()
    assert "      checks:\n" in text
    fleet.write_text(text.replace("      checks:\n", "      checks:\n        metrics: {report: check.json}\n", 1))
    checks = [p.onboarding.checks["metrics"] for p in load_registry(fleet).pools
              if "metrics" in p.onboarding.checks]
    assert [c.files for c in checks] == [{"report": "check.json"}]


def test_the_onboarding_page_lists_the_families_no_profile_maps(
        fleet_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    bad = report(tmp_path, NEW_EXPORTER)
    assert run(capsys, "--db", str(fleet_db), "onboarding", "add-evidence", "mlu370-a", "metrics", str(bad))[0] == 0
    at = open_page(fleet_db, monkeypatch, "screens/onboarding.py")
    assert not at.exception, at.exception
    assert at.selectbox(key="onboarding_detail").value == "mlu370-a"  # the pool with evidence opens first
    assert any("no profile maps" in str(m.value) for m in at.markdown)
    unmapped = next(d.value for d in at.dataframe if list(d.value.columns) == ["name", "type", "samples", "profile",
                                                                               "reason"])
    assert list(unmapped["name"]) == ["acme_npu_hbm_used_bytes", "acme_npu_link_errors"]
