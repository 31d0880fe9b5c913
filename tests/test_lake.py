"""The lake: Hive-partitioned Parquet read back exactly by DuckDB and Polars, re-runs that write only what
changed, and exports killed mid-write that leave nothing half-written where readers look."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import duckdb
import polars as pl
import pytest

from store import Held, IngestRun, Store, commit_run, connect
from store.errors import StoreError
from store.exports import ExportFilter
from store.lake import write_lake
from store.rollups import prune_raw
from tests.conftest import REPO

DAY = 86_400_000
T = 1_795_000_000_000 - 1_795_000_000_000 % DAY  # midnight UTC, 2026-11-18
COLS = ("ts", "pool", "node", "device", "metric", "value", "attributes")
# Hand-planted rows over three days and two pools: four partitions.
GOLDEN = [
    (T - 1, "a", "n1", "0", "accelerator.power", 350.5, "{}"),                                    # 2026-11-17, a
    (T + 5, "a", "n1", "", "serving.requests", 7.0, '{"model":"m, \\"x\\"","outcome":"ok"}'),    # 2026-11-18, a
    (T + 6, "a", "n1", "0", "accelerator.power", 351.0, "{}"),                                   # 2026-11-18, a
    (T + 10, "b", "n2", "1", "accelerator.power", 120.0, "{}"),                                  # 2026-11-18, b
    (T + DAY + 1, "a", "n1", "0", "accelerator.utilization", 0.25, "{}"),                        # 2026-11-19, a
]
PARTS = ["date=2026-11-17/pool=a", "date=2026-11-18/pool=a", "date=2026-11-18/pool=b", "date=2026-11-19/pool=a"]


def add(con: duckdb.DuckDBPyConnection, rows: list[tuple[object, ...]]) -> None:
    run = IngestRun("file", f"test-{len(rows)}-{rows[0][0]}")
    run.add_read(len(rows))
    run.add_samples(pl.DataFrame(rows, schema=list(COLS), orient="row"))
    commit_run(Held(con), run)


@pytest.fixture
def filled(con: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyConnection:
    add(con, GOLDEN)
    return con


def by_duckdb(folder: Path) -> set[tuple[object, ...]]:
    glob = str(folder / "**" / "*.parquet")
    rows = duckdb.sql(f"SELECT {', '.join(COLS)} FROM read_parquet('{glob}', hive_partitioning = true)").fetchall()
    assert len(rows) == len(set(rows)), "a row was written twice"
    return set(rows)


def by_polars(folder: Path) -> pl.DataFrame:
    return pl.scan_parquet(folder / "**" / "*.parquet", hive_partitioning=True).select(COLS).collect().sort(COLS)


def golden_frame(rows: list[tuple[object, ...]]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema=list(COLS), orient="row").sort(COLS)


def files(folder: Path) -> dict[str, tuple[int, int]]:
    """Every file of the lake (hidden ones too) with its inode and modification time."""
    return {str(p.relative_to(folder)): (p.stat().st_ino, p.stat().st_mtime_ns)
            for p in folder.rglob("*") if p.is_file()}


def test_reads_back_exactly_the_stored_rows_with_duckdb_and_polars(filled: duckdb.DuckDBPyConnection,
                                                                    tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    lake.mkdir()
    (lake / ".lock").write_text("")  # where earlier versions kept the writer's lock: cleared
    result = write_lake(Held(filled), lake, version="9.9.9")
    assert (result.rows, result.written, result.unchanged, result.kept) == (5, 4, 0, 0)
    assert not (lake / ".lock").exists() and (tmp_path / ".lake.lock").exists()  # beside the lake, not in it
    assert sorted(str(p.relative_to(lake).parent) for p in lake.rglob("*.parquet")) == PARTS
    assert all(p.name == "part-0.parquet" for p in lake.rglob("*.parquet"))
    assert by_duckdb(lake) == set(GOLDEN)
    assert by_polars(lake).equals(golden_frame(GOLDEN))
    dates = duckdb.sql(f"SELECT DISTINCT date::VARCHAR, typeof(date) FROM read_parquet('{lake}/**/*.parquet', "
                       "hive_partitioning = true) ORDER BY 1").fetchall()
    assert dates == [("2026-11-17", "DATE"), ("2026-11-18", "DATE"), ("2026-11-19", "DATE")]
    schema = json.loads((lake / "_schema.json").read_text())
    assert schema["metric_catalog"]["version"] == "1" and schema["hetpool_version"] == "9.9.9"
    assert schema["metric_catalog"]["metrics"]["accelerator.power"] == {"unit": "W", "kind": "gauge"}
    declared = [(c["name"], c["type"]) for c in schema["columns"]]
    one = lake / "date=2026-11-18" / "pool=a" / "part-0.parquet"
    in_file = duckdb.sql(f"DESCRIBE SELECT * FROM read_parquet('{one}', hive_partitioning = false)").fetchall()
    assert [(r[0], r[1]) for r in in_file] == declared == [
        ("ts", "BIGINT"), ("pool", "VARCHAR"), ("node", "VARCHAR"), ("device", "VARCHAR"), ("metric", "VARCHAR"),
        ("value", "DOUBLE"), ("attributes", "VARCHAR")]
    manifest = json.loads((lake / "_manifest.json").read_text())
    assert {k: v["rows"] for k, v in manifest["partitions"].items()} == dict(zip(PARTS, [1, 2, 1, 1], strict=True))


def test_a_rerun_with_nothing_new_writes_nothing(filled: duckdb.DuckDBPyConnection, tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    write_lake(Held(filled), lake)
    before = files(lake)
    again = write_lake(Held(filled), lake)
    assert (again.rows, again.written, again.unchanged) == (0, 0, 4)
    assert files(lake) == before


def test_new_samples_rewrite_only_their_partition(filled: duckdb.DuckDBPyConnection, tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    write_lake(Held(filled), lake)
    before = files(lake)
    late = (T + 3_600_000, "b", "n2", "1", "accelerator.power", 125.0, "{}")  # one more row for 2026-11-18, b
    add(filled, [late])
    again = write_lake(Held(filled), lake)
    assert (again.rows, again.written, again.unchanged) == (2, 1, 3)  # the partition is rewritten whole
    after = files(lake)
    changed = {name for name in before if after.get(name) != before[name]}
    assert changed == {"date=2026-11-18/pool=b/part-0.parquet", "_manifest.json"}
    assert by_duckdb(lake) == {*GOLDEN, late}


def test_a_changed_value_with_the_same_row_count_is_a_change(filled: duckdb.DuckDBPyConnection,
                                                             tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    write_lake(Held(filled), lake)
    filled.execute("UPDATE samples SET value = 121.0 WHERE pool = 'b'")
    assert write_lake(Held(filled), lake).written == 1
    assert (T + 10, "b", "n2", "1", "accelerator.power", 121.0, "{}") in by_duckdb(lake)


def test_a_failing_rename_leaves_only_whole_partitions_and_a_rerun_completes(filled: duckdb.DuckDBPyConnection,
                                                                            tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    renames: list[Path] = []

    def fail_on_the_second_partition(src: Path, dst: Path) -> None:
        if dst.name == "part-0.parquet":
            renames.append(dst)
            if len(renames) == 2:
                assert src.exists() and src.name.startswith(".")  # the whole file is written, under its temp name
                raise OSError(28, "No space left on device")
        os.replace(src, dst)

    with pytest.raises(OSError, match="No space left"):
        write_lake(Held(filled), lake, replace=fail_on_the_second_partition)
    assert by_duckdb(lake) == {GOLDEN[0]}  # the first partition, whole; the second nowhere
    assert not [p for p in lake.rglob("*.tmp")]
    again = write_lake(Held(filled), lake)
    assert (again.written, again.unchanged) == (3, 1)
    assert by_duckdb(lake) == set(GOLDEN) and by_polars(lake).equals(golden_frame(GOLDEN))


KILLER = """
import os, signal, sys
from store import Store
from store.lake import write_lake
count = []
def replace(src, dst):
    if dst.name == "part-0.parquet":
        count.append(dst)
        if len(count) == 3:
            os.kill(os.getpid(), signal.SIGKILL)  # after the temp file is written, before it is renamed
    os.replace(src, dst)
write_lake(Store(sys.argv[1]), sys.argv[2], replace=replace)
"""


def test_sigkill_mid_write_leaves_no_visible_partial_file(db_path: Path, tmp_path: Path) -> None:
    con = connect(db_path)
    add(con, GOLDEN)
    con.close()
    lake = tmp_path / "lake"
    proc = subprocess.run([sys.executable, "-c", KILLER, str(db_path), str(lake)], cwd=REPO, capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    left = [str(p.relative_to(lake)) for p in lake.rglob("*.tmp")]
    assert len(left) == 1 and left[0].startswith("date=2026-11-18/pool=b/.part-0.parquet.")
    assert by_duckdb(lake) == set(GOLDEN[:3]) and by_polars(lake).equals(golden_frame(GOLDEN[:3]))
    again = write_lake(Store(db_path), lake)
    assert again.written == 4  # no manifest survived the kill: every partition is written again, whole
    assert by_duckdb(lake) == set(GOLDEN) and not list(lake.rglob("*.tmp"))


def test_partitions_the_store_pruned_stay_in_the_lake(filled: duckdb.DuckDBPyConnection, tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    write_lake(Held(filled), lake)
    prune_raw(filled, keep_ms=DAY, now_ms=T + 2 * DAY)  # raw samples before 2026-11-19 00:00 are gone
    assert filled.execute("SELECT count(*) FROM samples").fetchall() == [(1,)]
    again = write_lake(Held(filled), lake)
    assert (again.written, again.unchanged, again.kept) == (0, 1, 3)
    assert by_duckdb(lake) == set(GOLDEN)


def test_window_and_filters_narrow_what_is_written(filled: duckdb.DuckDBPyConnection, tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    result = write_lake(Held(filled), lake, ExportFilter(start_ms=T + 6, end_ms=T + 7, pools=("a",)))
    assert (result.rows, result.written) == (2, 1)  # the window picks its day, and the day is written whole
    assert by_duckdb(lake) == set(GOLDEN[1:3])
    more = write_lake(Held(filled), lake, ExportFilter(start_ms=T + DAY))
    assert (more.rows, more.written, more.kept) == (1, 1, 1)
    assert by_duckdb(lake) == {*GOLDEN[1:3], GOLDEN[4]}
    empty = write_lake(Held(filled), tmp_path / "empty", ExportFilter(start_ms=T + 9 * DAY, pools=("b",)))
    assert (empty.rows, empty.written) == (0, 0)  # a known pool with nothing in the window is no error


def test_an_hourly_lake_carries_the_rollup_columns(filled: duckdb.DuckDBPyConnection, tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    write_lake(Held(filled), lake, ExportFilter(resolution="1h"))
    got = duckdb.sql(f"SELECT ts, value, min, max, last, count FROM '{lake}/date=2026-11-18/pool=a/*.parquet' "
                     "WHERE metric = 'accelerator.power'").fetchall()
    assert got == [(T, 351.0, 351.0, 351.0, 351.0, 1)]
    names = [c["name"] for c in json.loads((lake / "_schema.json").read_text())["columns"]]
    assert names == [*COLS, "min", "max", "last", "count"]


@pytest.mark.parametrize(("flt", "prepare", "message"), [
    (ExportFilter(pools=("mi300x-b",)), None, "unknown pool 'mi300x-b'; known: a, b"),
    (ExportFilter(metrics=("accelerator.pwr",)), None, "unknown metric 'accelerator.pwr'; known: accelerator.clock, "),
    (ExportFilter(resolution="5m"), None, "unknown resolution '5m'; known: auto, raw, 1m, 1h"),
    (ExportFilter(resolution="1m"), "raw-lake", "holds raw rows, this export asks for 1m; pass --resolution raw"),
    (ExportFilter(), "power-lake", "holds only accelerator.power, this export asks for every metric; pick another"),
    (ExportFilter(), "foreign", "holds files but no _manifest.json"),
    (ExportFilter(), "file", "is a file; a partitioned export goes to a folder"),
    (ExportFilter(), "bad-manifest", "is not a lake manifest (no field 'resolution'); move it away"),
])
def test_refusals(filled: duckdb.DuckDBPyConnection, tmp_path: Path, flt: ExportFilter, prepare: str | None,
                  message: str) -> None:
    lake = tmp_path / "lake"
    if prepare == "raw-lake":
        write_lake(Held(filled), lake)
    elif prepare == "power-lake":
        write_lake(Held(filled), lake, ExportFilter(metrics=("accelerator.power",)))
    elif prepare == "foreign":
        lake.mkdir()
        (lake / "notes.txt").write_text("mine")
    elif prepare == "file":
        lake.write_text("x")
    elif prepare == "bad-manifest":
        lake.mkdir()
        (lake / "_manifest.json").write_text('{"format": 1, "partitions": {}}')
    with pytest.raises(StoreError, match=re.escape(message)):
        write_lake(Held(filled), lake, flt)
    if prepare is None:
        assert not lake.exists()
