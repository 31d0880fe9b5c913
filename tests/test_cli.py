"""The CLI: exit codes, one-line errors, JSON output, and documentation of every command."""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from app.cli import build_parser, main
from tests.conftest import FLEET, REPO


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as exc:  # argparse errors
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def leaf_commands(parser: argparse.ArgumentParser, prefix: str = "hetpool") -> dict[str, argparse.ArgumentParser]:
    """Every runnable command path, such as 'hetpool registry load'."""
    found: dict[str, argparse.ArgumentParser] = {}
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        return {prefix: parser}
    for name, child in subs[0].choices.items():
        found.update(leaf_commands(child, f"{prefix} {name}"))
    return found


def test_every_command_has_an_example_and_is_in_the_readme() -> None:
    reference = (REPO / "docs" / "cli.md").read_text()
    commands = leaf_commands(build_parser())
    assert {"hetpool init", "hetpool registry validate", "hetpool registry load", "hetpool registry show",
            "hetpool console"} <= set(commands)
    for path, parser in commands.items():
        assert parser.epilog and "example:\n  hetpool" in parser.epilog, f"{path} has no example"
        assert parser.description, f"{path} has no help text"
        assert re.search(rf"### `{re.escape(path)}\b", reference), f"{path} is not documented in docs/cli.md"


def test_init_twice_and_json(capsys: pytest.CaptureFixture[str], db_path: Path) -> None:
    code, out, _ = run(capsys, "--db", str(db_path), "init")
    assert code == 0 and "schema version" in out
    code, out, _ = run(capsys, "init", "--db", str(db_path), "--json")
    assert code == 0
    assert json.loads(out)["schema_version"] >= 1


def test_validate_load_show(capsys: pytest.CaptureFixture[str], db_path: Path) -> None:
    code, out, _ = run(capsys, "registry", "validate", str(FLEET))
    assert code == 0 and "valid (5 chips, 4 models, 6 pools)" in out
    code, out, _ = run(capsys, "--db", str(db_path), "--json", "registry", "load", str(FLEET))
    assert code == 0 and json.loads(out) == {"snapshot_id": 1, "created": True, "pools": 6, "evidence_files": 5,
                                             "evidence_stored": 5}
    code, out, _ = run(capsys, "--db", str(db_path), "--json", "registry", "load", str(FLEET))
    assert json.loads(out)["created"] is False and json.loads(out)["evidence_stored"] == 0
    code, out, _ = run(capsys, "--db", str(db_path), "registry", "show")
    assert code == 0
    assert re.search(r"h100-a\s+h100-sxm\s+64\s+204\.80\s+llama-3\.1-70b\s+production", out)
    code, out, _ = run(capsys, "--db", str(db_path), "registry", "show", "--json")
    assert [p["id"] for p in json.loads(out)["pools"]] == ["h100-a", "mi300x-a", "ascend-a", "gaudi3-a", "mlu370-a",
                                                           "h100-vl"]


def test_invalid_registry_lists_every_problem_and_exits_2(capsys: pytest.CaptureFixture[str],
                                                           tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(FLEET.read_text().replace("chip: gaudi3\n", "chip: gaudi9\n").replace(
        "devices: 16\n", "devices: -16\n"))
    code, out, err = run(capsys, "registry", "validate", str(bad))
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert any(re.match(rf"{re.escape(str(bad))}:\d+: pools\[3\]\.chip: unknown chip 'gaudi9'", ln) for ln in lines)
    assert any("pools[4].devices: must be > 0, got -16" in ln for ln in lines)
    code, _, err = run(capsys, "--db", str(tmp_path / "x.duckdb"), "registry", "load", str(bad))
    assert code == 2
    assert len(err.strip().splitlines()) == 1 and err.startswith("hetpool: error: ")
    assert "(and 1 more problems)" in err


@pytest.mark.parametrize(("argv", "message"), [
    (["registry", "frob"], "invalid choice: 'frob'"),
    (["registry", "load"], "the following arguments are required: file"),
    (["--db", "{db}", "registry", "show"], "does not exist; run 'hetpool init'"),
    (["registry", "load", "{missing}"], "file not found"),
    (["console", "--port", "eighty"], "invalid int value: 'eighty'"),
])
def test_user_errors_are_one_line_exit_2(capsys: pytest.CaptureFixture[str], tmp_path: Path, argv: list[str],
                                         message: str) -> None:
    argv = [a.format(db=tmp_path / "absent.duckdb", missing=tmp_path / "none.yaml") for a in argv]
    code, out, err = run(capsys, *argv)
    assert out == ""
    assert code == 2
    assert message in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_installed_console_script_reports_errors_without_traceback(tmp_path: Path) -> None:
    exe = Path(sys.executable).parent / "hetpool"
    assert exe.exists(), "the hetpool console script is not installed in this environment"
    assert subprocess.run([str(exe), "--db", str(tmp_path / "x.duckdb"), "init"], timeout=60).returncode == 0
    proc = subprocess.run([str(exe), "--db", str(tmp_path / "x.duckdb"), "registry", "show"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.strip() == ("hetpool: error: no registry loaded; run 'hetpool registry load "
                                   "examples/fleet.yaml' first")


HEALTHY_FLEET = """
chips:
  - {id: h100-sxm, vendor: nvidia, peak_tflops_bf16: 989, hbm_capacity_gb: 80, hbm_bw_tbps: 3.35,
     interconnect: {kind: nvlink4, bw_gbps: 450}, supported_dtypes: [bf16],
     thermal: {warning_c: 83, critical_c: 90}}
pools:
  - {id: calm, chip: h100-sxm, devices: 2, devices_per_node: 2, hourly_cost_per_device: 3.0, exporter: dcgm,
     assign: {node_pattern: "calm-*"}, cost_model: {mfu: 0.4, mem_bw_eff: 0.7}}
"""


@pytest.fixture
def healthy_db(tmp_path: Path) -> Path:
    """Two devices for 20 minutes: busy, cool, healthy, half their HBM used, no error, both still reporting."""
    import polars as pl

    from pool_registry import load_registry_text
    from store import Held, IngestRun, commit_run, connect, save_registry

    path = tmp_path / "healthy.duckdb"
    con = connect(path)
    save_registry(con, load_registry_text(HEALTHY_FLEET, "healthy.yaml"), "healthy.yaml")
    t0 = 1_767_225_600_000
    rows = [(t0 + k * 30_000, "calm", "calm-01", dev, metric, value, "{}")
            for k in range(40) for dev in ("0", "1")
            for metric, value in (("accelerator.utilization", 0.7), ("accelerator.clock", 1.98e9),
                                  ("accelerator.temperature", 61.0), ("accelerator.health", 1.0),
                                  ("accelerator.memory.used", 40e9), ("accelerator.memory.total", 80e9))]
    run = IngestRun("file", "healthy")
    run.add_read(len(rows))
    run.add_samples(pl.DataFrame(rows, schema=["ts", "pool", "node", "device", "metric", "value", "attributes"],
                                 orient="row"))
    commit_run(Held(con), run)
    con.close()
    return path


def test_alerts_exit_0_on_a_healthy_fleet(capsys: pytest.CaptureFixture[str], healthy_db: Path) -> None:
    code, out, _ = run(capsys, "--db", str(healthy_db), "alerts")
    assert code == 0
    assert out.splitlines() == ["status, 2025-12-31 01:00 to 2026-01-01 01:00 UTC: Pool calm is healthy: no status "
                                "rule fires in this window."]
    code, out, _ = run(capsys, "--db", str(healthy_db), "alerts", "--json")
    assert code == 0 and json.loads(out)["statuses"] == [] and json.loads(out)["level"] == "ok"


def test_alerts_exit_1_on_the_demo_and_name_the_fatal_node(capsys: pytest.CaptureFixture[str], demo_db: Path) -> None:
    code, out, _ = run(capsys, "--db", str(demo_db), "alerts", "--json")
    assert code == 1
    report = json.loads(out)
    assert report["level"] == "critical" and report["critical"] >= 1
    fatal = [s for s in report["statuses"] if s["scope"] == "device" and "fatal error event" in s["reason"]]
    assert {(s["level"], s["where"]) for s in fatal} == {("critical", "h100-a/h100-a-02/0")}
    assert "79" in fatal[0]["reason"]  # the planted XID
    code, out, _ = run(capsys, "--db", str(demo_db), "alerts")
    assert code == 1 and re.search(r"^  CRITICAL device\s+h100-a/h100-a-02/0\s+\d+ fatal error events \(codes ",
                                   out, re.MULTILINE)


def test_alerts_with_a_bad_rules_file_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str], healthy_db: Path,
                                                              tmp_path: Path) -> None:
    bad = tmp_path / "rules.yaml"
    bad.write_text("version: 1\nhbm_used: {warning: 0.99, critical: 0.9}\n")
    code, out, err = run(capsys, "--db", str(healthy_db), "alerts", "--rules", str(bad))
    assert code == 2 and out == ""
    assert err.strip() == (f"hetpool: error: {bad}:2: hbm_used.warning: warning 0.99 must be below or at critical "
                           "0.9 (the rule fires at or above a level)")
    bad.write_text("sla: {default_tier: standard}\n")  # valid: the shipped tiers are kept
    assert run(capsys, "--db", str(healthy_db), "alerts", "--rules", str(bad))[0] == 0
