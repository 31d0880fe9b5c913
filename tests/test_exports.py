"""The normalized feed as CSV, JSONL and Parquet (one file or Hive-partitioned), with filters."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import duckdb
import polars as pl
import pytest

from store import Held, IngestRun, commit_run
from store.exceptions import StoreError
from store.exports import ExportFilter, export_samples

DAY = 86_400_000
T = 1_795_000_000_000 - 1_795_000_000_000 % DAY  # midnight UTC, 2026-11-18
ROWS = pl.DataFrame({
    "ts": [T - 1, T + 5, T + 10, T + DAY + 1],
    "pool": ["a", "a", "b", "a"],
    "node": ["n1", "n1", "n2", "n1"],
    "device": ["0", "", "1", "0"],
    "metric": ["accelerator.power", "serving.requests", "accelerator.power", "accelerator.power"],
    "value": [350.5, 7.0, 120.0, 351.0],
    "attributes": ["{}", '{"model":"m, \\"x\\"","outcome":"ok"}', "{}", "{}"],
})


@pytest.fixture
def filled(con: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyConnection:
    run = IngestRun("file", "test")
    run.add_read(ROWS.height)
    run.add_samples(ROWS)
    commit_run(Held(con), run)
    return con


def test_csv_has_the_canonical_columns_and_json_attributes(filled: duckdb.DuckDBPyConnection, tmp_path: Path) -> None:
    out = tmp_path / "feed.csv"
    assert export_samples(filled, "csv", out).rows == 4
    rows = list(csv.DictReader(out.open()))
    assert list(rows[0]) == ["ts", "pool", "node", "device", "metric", "value", "attributes"]
    assert rows[1] == {"ts": str(T + 5), "pool": "a", "node": "n1", "device": "", "metric": "serving.requests",
                       "value": "7.0", "attributes": '{"model":"m, \\"x\\"","outcome":"ok"}'}
    assert json.loads(rows[1]["attributes"]) == {"model": 'm, "x"', "outcome": "ok"}


def test_jsonl_attributes_are_objects_and_filters_apply(filled: duckdb.DuckDBPyConnection, tmp_path: Path) -> None:
    out = tmp_path / "feed.jsonl"
    result = export_samples(filled, "jsonl", out, ExportFilter(start_ms=T, end_ms=T + DAY, pools=("a",)))
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert result.rows == 1 and lines == [{"ts": T + 5, "pool": "a", "node": "n1", "device": "",
                                           "metric": "serving.requests", "value": 7.0,
                                           "attributes": {"model": 'm, "x"', "outcome": "ok"}}]
    export_samples(filled, "jsonl", out, ExportFilter(metrics=("accelerator.power",)))
    assert [json.loads(x)["value"] for x in out.read_text().splitlines()] == [350.5, 120.0, 351.0]


def test_parquet_file_and_hive_partitions(filled: duckdb.DuckDBPyConnection, tmp_path: Path) -> None:
    single = tmp_path / "feed.parquet"
    export_samples(filled, "parquet", single)
    assert pl.read_parquet(single).equals(ROWS.sort("ts"))
    folder = tmp_path / "feed"
    result = export_samples(filled, "parquet", folder)
    assert result.partitioned and result.rows == 4
    parts = sorted(str(p.relative_to(folder).parent) for p in folder.rglob("*.parquet"))
    assert parts == ["date=2026-11-17/pool=a", "date=2026-11-18/pool=a", "date=2026-11-18/pool=b",
                     "date=2026-11-19/pool=a"]
    back = pl.read_parquet(folder / "**" / "*.parquet", hive_partitioning=True)
    assert back.select(ROWS.columns).sort("ts").equals(ROWS.sort("ts"))
    with pytest.raises(StoreError, match="is not empty; pick a new one"):
        export_samples(filled, "parquet", folder)


def test_bad_targets(filled: duckdb.DuckDBPyConnection, tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="unknown export format 'xml'; known: csv, jsonl, parquet"):
        export_samples(filled, "xml", tmp_path / "x.xml")
    with pytest.raises(StoreError, match=r"folder .* does not exist"):
        export_samples(filled, "csv", tmp_path / "missing" / "x.csv")
    with pytest.raises(StoreError, match="is a directory"):
        export_samples(filled, "csv", tmp_path)
    quoted = tmp_path / "it's.csv"
    assert export_samples(filled, "csv", quoted).rows == 4 and quoted.exists()


def power_series(con: duckdb.DuckDBPyConnection, days: int) -> None:
    """One power sample every 10 minutes for `days` days: values 0, 1, 2, ... so bucket averages are known."""
    n = days * 144
    rows = pl.DataFrame({"ts": [T + i * 600_000 for i in range(n)], "pool": "a", "node": "n1", "device": "0",
                         "metric": "accelerator.power", "value": [float(i) for i in range(n)], "attributes": "{}"})
    run = IngestRun("file", "series")
    run.add_read(n)
    run.add_samples(rows)
    commit_run(Held(con), run)


@pytest.mark.parametrize(("days", "window_days", "resolution", "rows"), [
    (1, 1, "raw", 144),
    (3, 3, "1m", 432),      # three days: 1-minute buckets, one sample in each
    (20, 20, "1h", 480),    # twenty days: hourly buckets
])
def test_auto_resolution_follows_the_window_length(con: duckdb.DuckDBPyConnection, tmp_path: Path, days: int,
                                                   window_days: int, resolution: str, rows: int) -> None:
    power_series(con, days)
    out = tmp_path / "feed.csv"
    result = export_samples(con, "csv", out, ExportFilter(T, T + window_days * DAY))
    assert (result.resolution, result.rows) == (resolution, rows)
    got = pl.read_csv(out)
    if resolution == "1h":
        # the first hour holds samples 0..5: average 2.5, min 0, max 5, last 5, count 6
        assert got.row(0, named=True) | {"attributes": "{}"} == {
            "ts": T, "pool": "a", "node": "n1", "device": 0, "metric": "accelerator.power", "value": 2.5,
            "attributes": "{}", "min": 0.0, "max": 5.0, "last": 5.0, "count": 6}


def test_auto_reads_rollups_once_raw_samples_are_pruned(con: duckdb.DuckDBPyConnection, tmp_path: Path) -> None:
    from store.rollups import prune_raw

    power_series(con, 1)
    prune_raw(con, keep_ms=6 * 3_600_000, now_ms=T + DAY)  # keep the last 6 hours of raw samples
    recent = export_samples(con, "csv", tmp_path / "recent.csv", ExportFilter(T + 20 * 3_600_000, T + DAY))
    old = export_samples(con, "csv", tmp_path / "old.csv", ExportFilter(T, T + 3_600_000))
    assert (recent.resolution, recent.rows) == ("raw", 24)
    assert (old.resolution, old.rows) == ("1m", 6)
    raw_old = export_samples(con, "csv", tmp_path / "gone.csv", ExportFilter(T, T + 3_600_000, resolution="raw"))
    assert raw_old.rows == 0


def test_unknown_resolution(filled: duckdb.DuckDBPyConnection, tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="unknown resolution '5m'; known: auto, raw, 1m, 1h"):
        export_samples(filled, "csv", tmp_path / "x.csv", ExportFilter(resolution="5m"))


def test_names_a_spreadsheet_would_run_are_quoted_in_csv_only(con: duckdb.DuckDBPyConnection, tmp_path: Path) -> None:
    hostile = ['=HYPERLINK("http://x","y")', "+1+1", "@SUM(A1)", "-2", "n-1"]
    rows = pl.DataFrame({"ts": [T + i for i in range(5)], "pool": ["a"] * 5, "node": hostile, "device": ["0"] * 5,
                         "metric": ["accelerator.power"] * 5, "value": [1.0] * 5, "attributes": ["{}"] * 5})
    run = IngestRun("file", "hostile")
    run.add_read(rows.height)
    run.add_samples(rows)
    commit_run(Held(con), run)
    out = tmp_path / "feed.csv"
    export_samples(con, "csv", out)
    with out.open() as f:
        nodes = [r["node"] for r in csv.DictReader(f)]
    assert nodes == ["'" + hostile[0], "'+1+1", "'@SUM(A1)", "'-2", "n-1"]
    parquet = tmp_path / "feed.parquet"
    export_samples(con, "parquet", parquet)
    assert pl.read_parquet(parquet)["node"].to_list() == hostile  # the data itself is kept as it came
