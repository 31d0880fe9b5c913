"""hetpool export from the command line."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from tests.test_ingest_file import run
from tests.test_normalize import FIXTURES


def test_export_csv_and_partitioned_parquet(capsys: pytest.CaptureFixture[str], fleet_db: Path,
                                            tmp_path: Path) -> None:
    code, _, err = run(capsys, "--db", str(fleet_db), "ingest", "file", str(FIXTURES / "dcgm_memory_xid.prom"),
                       "--at", "2026-11-29T08:00:00Z")
    assert code == 0, err
    out = tmp_path / "feed.csv"
    code, text, _ = run(capsys, "--db", str(fleet_db), "export", "--format", "csv", "--out", str(out),
                        "--metric", "accelerator.memory.used")
    assert code == 0 and text.strip() == f"wrote 1 raw rows to {out}"
    assert list(csv.reader(out.open())) == [
        ["ts", "pool", "node", "device", "metric", "value", "attributes"],
        ["1795939200000", "h100-a", "h100-a-001", "0", "accelerator.memory.used", "1073741824.0", "{}"]]
    code, text, _ = run(capsys, "--db", str(fleet_db), "--json", "export", "--format", "parquet", "--out",
                        str(tmp_path / "feed"), "--start", "2026-11-29T00:00:00Z", "--end", "2026-11-30T00:00:00Z")
    assert code == 0 and json.loads(text) == {"rows": 6, "path": str(tmp_path / "feed"), "format": "parquet",
                                              "partitioned": True, "resolution": "raw"}
    assert (tmp_path / "feed" / "date=2026-11-29" / "pool=h100-a").is_dir()
    code, _, err = run(capsys, "--db", str(fleet_db), "export", "--format", "xml", "--out", str(out))
    assert code == 2 and "invalid choice: 'xml'" in err


def test_partitioned_lake_then_a_rerun_that_writes_nothing(capsys: pytest.CaptureFixture[str], fleet_db: Path,
                                                          tmp_path: Path) -> None:
    code, _, err = run(capsys, "--db", str(fleet_db), "ingest", "file", str(FIXTURES / "dcgm_memory_xid.prom"),
                       "--at", "2026-11-29T08:00:00Z")
    assert code == 0, err
    lake = tmp_path / "lake"
    code, text, err = run(capsys, "--db", str(fleet_db), "export", "--format", "parquet", "--out", str(lake),
                          "--partition", "--pool", "h100-a")
    assert code == 0, err
    assert text.strip() == f"wrote 6 raw rows in 1 partitions to {lake} (partitioned as date=YYYY-MM-DD/pool=ID/; " \
                           "0 unchanged, 0 kept from earlier runs)"
    assert [str(p.relative_to(lake)) for p in lake.rglob("*.parquet")] == ["date=2026-11-29/pool=h100-a/part-0.parquet"]
    code, text, _ = run(capsys, "--db", str(fleet_db), "--json", "export", "--format", "parquet", "--out", str(lake),
                        "--partition")
    assert code == 0 and json.loads(text) == {
        "rows": 0, "path": str(lake), "format": "parquet", "partitioned": True, "resolution": "raw",
        "partitions_written": 0, "partitions_unchanged": 1, "partitions_kept": 0}
    code, text, _ = run(capsys, "--db", str(fleet_db), "export", "--format", "parquet", "--out",
                        str(tmp_path / "quiet"), "--partition", "--pool", "mi300x-a")
    assert code == 0 and text.startswith("wrote 0 raw rows in 0 partitions")  # a known pool with no rows


@pytest.mark.parametrize(("argv", "message"), [
    (["--format", "parquet", "--partition", "--pool", "mi300x-b"], "unknown pool 'mi300x-b'; known: "),
    (["--format", "csv", "--pool", "h100-a", "--pool", "mi300x-b"], "unknown pool 'mi300x-b'; known: "),
    (["--format", "jsonl", "--metric", "accelerator.pwr"], "unknown metric 'accelerator.pwr'; known: accelerator."),
    (["--format", "parquet", "--partition", "--metric", "accelerator.pwr"], "unknown metric 'accelerator.pwr'"),
    (["--format", "csv", "--partition"], "--partition writes Parquet; got --format csv"),
])
def test_mistyped_names_are_exit_2_with_the_known_ones(capsys: pytest.CaptureFixture[str], fleet_db: Path,
                                                       tmp_path: Path, argv: list[str], message: str) -> None:
    out = tmp_path / "out"
    code, text, err = run(capsys, "--db", str(fleet_db), "export", "--out", str(out), *argv)
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1 and text == ""
    if "pool" in message:
        assert "h100-a" in err and "mi300x-a" in err  # the registry's pools
    assert not out.exists()
