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
