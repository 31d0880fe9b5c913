"""hetpool ingest file / ingest scrape from the command line: JSON counts, pools, one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest

from app.cli import main
from tests.test_normalize import FIXTURES
from tests.test_scrape import Exporter


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def test_file_json_counts_and_registry_pools(capsys: pytest.CaptureFixture[str], fleet_db: Path) -> None:
    code, out, _ = run(capsys, "--db", str(fleet_db), "--json", "ingest", "file", str(FIXTURES / "gaudi.prom"),
                       "--at", "2026-11-29T08:00:00Z")
    assert code == 0
    data = json.loads(out)
    counts = {k: data[k] for k in ("read", "stored", "rejected", "duplicates")}
    assert counts == {"read": 10, "stored": 8, "rejected": 2, "duplicates": 0}
    assert data["read"] == data["stored"] + data["rejected"] + data["duplicates"] + data["ignored"]
    code, out, _ = run(capsys, "--db", str(fleet_db), "ingest", "file", str(FIXTURES / "gaudi.prom"),
                       "--at", "2026-11-29T08:00:00Z")
    assert code == 0 and "read 10, stored 0, rejected 2, duplicates 8" in out
    assert "rejected 1: value 140.0 is above the valid maximum 100.0 of habanalabs_utilization" in out
    con = duckdb.connect(str(fleet_db), read_only=True)
    assert con.execute("SELECT DISTINCT pool, min(ts) FROM samples GROUP BY pool").fetchall() == [
        ("gaudi3-a", 1795939200000)]
    con.close()


@pytest.mark.parametrize("args, message", [
    (["--profile", "dcgn"], "unknown profile 'dcgn'; known: amd, ascend, cambricon, dcgm, gaudi"),
    (["--pool", "nope"], "unknown pool 'nope'; known: h100-a, mi300x-a, ascend-a, gaudi3-a, mlu370-a"),
    (["--at", "yesterday"], "bad time 'yesterday'"),
])
def test_bad_options_are_one_line_errors(capsys: pytest.CaptureFixture[str], fleet_db: Path, args: list[str],
                                         message: str) -> None:
    code, out, err = run(capsys, "--db", str(fleet_db), "ingest", "file", str(FIXTURES / "gaudi.prom"), *args)
    assert code == 2 and out == "" and message in err and len(err.strip().splitlines()) == 1


def test_missing_file_registry_and_bad_profile_dir(capsys: pytest.CaptureFixture[str], db_path: Path,
                                                   tmp_path: Path) -> None:
    code, _, err = run(capsys, "--db", str(db_path), "ingest", "file", str(tmp_path / "none.prom"), "--pool", "p")
    assert code == 2 and "file '" in err and "none.prom' not found" in err
    code, _, err = run(capsys, "--db", str(db_path), "ingest", "file", str(FIXTURES / "gaudi.prom"))
    assert code == 2 and "no registry loaded" in err
    (tmp_path / "x.yaml").write_text("profile: x\ndetect: [x_]\nmetrics:\n  x_a: {metric: nope, unit: W}\n")
    code, _, err = run(capsys, "--db", str(db_path), "ingest", "file", str(FIXTURES / "gaudi.prom"), "--pool", "p",
                       "--profiles-dir", str(tmp_path))
    assert code == 2 and "x.yaml:4: metrics.x_a.metric: unknown canonical metric 'nope'" in err


def test_scrape_command_counts_every_scrape(capsys: pytest.CaptureFixture[str], db_path: Path) -> None:
    exporter = Exporter()
    try:
        exporter.bodies["/metrics"] = (FIXTURES / "dcgm_memory_xid.prom").read_bytes()
        code, out, err = run(capsys, "--db", str(db_path), "--json", "ingest", "scrape", exporter.url("/metrics"),
                             "--pool", "h100-a", "--every", "10ms", "--count", "3")
    finally:
        exporter.close()
    assert code == 0, err
    data = json.loads(out)
    assert {k: data[k] for k in ("read", "stored", "rejected", "duplicates")} == {
        "read": 21, "stored": 19, "rejected": 0, "duplicates": 2}  # the XID is one event over three scrapes
    assert len(data["runs"]) == 3 and err.count("scrape ") == 3
