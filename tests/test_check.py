"""hetpool check: validity with line, rule and text; profile coverage; exit codes; files and live URLs."""

from __future__ import annotations

import gzip
import http.client
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.commands.check import check, fetch
from collectors.outbound import connect
from tests.cli import run
from tests.conftest import REPO
from tests.exporters import Exporter

DCGM = REPO / "examples" / "exporters" / "dcgm-h100-a-01.prom"
NODE = 'gpu="0",Hostname="h1"'
OPENMETRICS = "\n".join([
    "# TYPE DCGM_FI_DEV_GPU_UTIL gauge",
    f"DCGM_FI_DEV_GPU_UTIL{{{NODE}}} 40",
    "# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter",
    f"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION_total{{{NODE}}} -5",
    f"DCGM_FI_DEV_GPU_UTIL{{{NODE}}} 41",
    "# EOF",
]) + "\n"


@pytest.fixture
def exporter() -> Iterator[Exporter]:
    e = Exporter()
    yield e
    e.close()


def test_a_valid_complete_file_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "check", str(DCGM))
    assert code == 0, out
    assert "Prometheus text format, valid" in out and "every core metric is delivered" in out
    assert "DCGM_FI_DEV_FB_FREE" in out and "accelerator.memory.total (MiB, derived)" in out


def test_json_report(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "check", str(DCGM), "--json")
    result = json.loads(out)
    assert code == 0
    assert {"format", "valid", "errors", "warnings", "families", "missing_core"} <= set(result)
    assert result["format"] == "prometheus" and result["valid"] is True and result["missing_core"] == []
    util = next(f for f in result["families"] if f["name"] == "DCGM_FI_DEV_GPU_UTIL")
    assert util == {"name": "DCGM_FI_DEV_GPU_UTIL", "type": "gauge", "samples": 2, "profile": "dcgm",
                    "canonical": [{"metric": "accelerator.utilization", "unit": "percent"}], "status": "mapped",
                    "reason": None}


def test_problems_have_line_rule_and_text_and_exit_1(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "om.prom"
    path.write_text(OPENMETRICS)
    code, out, _ = run(capsys, "check", str(path), "--json")
    result = json.loads(out)
    assert code == 1 and result["format"] == "openmetrics" and not result["valid"]
    got = [(e["line"], e["rule"], e["text"]) for e in result["errors"]]
    assert got == [(4, "counter", f"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION_total{{{NODE}}} -5"),
                   (5, "family-interleaved", f"DCGM_FI_DEV_GPU_UTIL{{{NODE}}} 41")]
    assert "accelerator.power" in result["missing_core"]
    code, out, _ = run(capsys, "check", str(path))
    assert code == 1 and "error line 4 [counter]: counter value is -5, negative" in out


def test_missing_core_metrics_and_unknown_families(tmp_path: Path) -> None:
    path = tmp_path / "x.prom"
    path.write_text(f"DCGM_FI_DEV_GPU_UTIL{{{NODE}}} 40\nDCGM_FI_DEV_FB_FREE{{{NODE}}} 1\nacme_npu_temp 50\n")
    result = check(str(path))
    assert result["valid"]
    assert result["missing_core"] == ["accelerator.memory.used", "accelerator.memory.total", "accelerator.power",
                                      "accelerator.temperature"]
    free, acme = result["families"][1:]
    assert free["canonical"] == [{"metric": "accelerator.memory.total", "unit": "MiB", "derived": True,
                                  "missing": ["DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_RESERVED"]}]
    assert acme["status"] == "unknown" and acme["profile"] is None and "no profile knows" in acme["reason"]


def test_a_profile_of_ones_own_maps_a_new_exporter(tmp_path: Path) -> None:
    (tmp_path / "acme.yaml").write_text(
        "profile: acme\nvendor: acme\ndetect: [acme_]\nnode_labels: [host]\ndevice_labels: [npu]\n"
        "metrics:\n  acme_npu_temp: {metric: accelerator.temperature, unit: celsius}\nignore: [acme_debug]\n")
    path = tmp_path / "x.prom"
    path.write_text("acme_npu_temp 50\nacme_debug 1\nacme_npu_volts 0.9\n")
    result = check(str(path), profiles_dirs=(str(tmp_path),))
    assert [(f["name"], f["status"], f["profile"]) for f in result["families"]] == [
        ("acme_npu_temp", "mapped", "acme"), ("acme_debug", "ignored", "acme"), ("acme_npu_volts", "unknown", "acme")]
    assert "not mapped by profile 'acme'" in result["families"][2]["reason"]
    forced = check(str(path), profile="dcgm", profiles_dirs=(str(tmp_path),))
    assert {f["status"] for f in forced["families"]} == {"unknown"}


def test_strict_checks_prometheus_text_as_openmetrics(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "check", str(DCGM), "--strict", "--json")
    result = json.loads(out)
    assert code == 1 and result["format"] == "openmetrics"
    assert result["errors"][-1]["rule"] == "eof"


def test_usage_and_io_errors_exit_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert run(capsys, "check", str(tmp_path / "nope.prom"))[0] == 2
    code, _, err = run(capsys, "check", str(DCGM), "--profile", "nosuch")
    assert code == 2 and "unknown profile 'nosuch'" in err
    assert run(capsys, "check")[0] == 2
    assert run(capsys, "check", "ftp://x/metrics")[0] == 2
    gz = tmp_path / "x.prom.gz"
    gz.write_bytes(gzip.compress(DCGM.read_bytes()))
    assert run(capsys, "check", str(gz))[0] == 0


def test_a_live_url_served_as_openmetrics(capsys: pytest.CaptureFixture[str], exporter: Exporter) -> None:
    exporter.bodies["/metrics"] = OPENMETRICS.replace("# EOF\n", "").encode()
    exporter.content_type = "application/openmetrics-text; version=1.0.0; charset=utf-8"
    code, out, _ = run(capsys, "check", exporter.url("/metrics"), "--json")
    result = json.loads(out)
    assert code == 1 and result["format"] == "openmetrics"
    assert {e["rule"] for e in result["errors"]} == {"counter", "family-interleaved", "eof"}
    assert exporter.requests[-1]["Accept"].startswith("text/plain;version=0.0.4")
    exporter.content_type = "text/plain; version=0.0.4"
    exporter.bodies["/metrics"] = DCGM.read_bytes()
    assert run(capsys, "check", exporter.url("/metrics"))[0] == 0
    code, _, err = run(capsys, "check", exporter.url("/nope"))
    assert code == 2 and "HTTP 404" in err


def test_fetch_takes_a_connection_factory(exporter: Exporter) -> None:
    exporter.bodies["/metrics"] = b"a 1\n"
    made: list[tuple[str, str, int]] = []

    def counting(scheme: str, host: str, port: int, timeout_s: float) -> http.client.HTTPConnection:
        made.append((scheme, host, port))
        return connect(scheme, host, port, timeout_s)

    body, kind = fetch(exporter.url("/metrics"), counting)
    assert (body, kind) == (b"a 1\n", "text/plain; version=0.0.4")
    assert made == [("http", "127.0.0.1", exporter.server.server_address[1])]


def test_a_family_of_metadata_only_delivers_nothing(tmp_path: Path) -> None:
    path = tmp_path / "x.prom"
    path.write_text("# HELP DCGM_FI_DEV_GPU_UTIL util\n# TYPE DCGM_FI_DEV_GPU_UTIL gauge\n")
    (family,) = check(str(path))["families"]
    assert family == {"name": "DCGM_FI_DEV_GPU_UTIL", "type": "gauge", "samples": 0, "profile": "dcgm",
                      "canonical": [], "status": "mapped", "reason": "no samples"}
    assert "accelerator.utilization" in check(str(path))["missing_core"]


def test_a_garbage_input_stops_the_check_at_its_problem_cap(tmp_path: Path) -> None:
    from normalizers.lint import MAX_PROBLEMS
    path = tmp_path / "garbage.prom.gz"
    path.write_bytes(gzip.compress(b"}\n" * (MAX_PROBLEMS + 5_000)))
    result = check(str(path))
    errors = result["errors"]
    assert len(errors) == MAX_PROBLEMS + 1 and not result["valid"]
    assert errors[-1]["rule"] == "too-many-problems"
    assert errors[-1]["message"] == (f"the check stopped at line {MAX_PROBLEMS} after {MAX_PROBLEMS:,} problems; "
                                     "fix these and check again")
