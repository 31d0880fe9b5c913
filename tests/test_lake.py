"""The lake: Hive-partitioned Parquet with a UTC millisecond TIMESTAMP and a map of attributes, read back exactly
and filtered by DuckDB, pyarrow.dataset and Polars, re-runs that write only what changed, lakes of the first
schema version upgraded in place, and exports killed mid-write that leave nothing half-written where readers
look."""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from app.serve.config import ExportPlan
from app.serve.lake import LakeExport
from store import Held, IngestRun, Store, commit_run, connect
from store.exceptions import StoreError
from store.exports import ExportFilter
from store.lake import fingerprints, partition_key, write_lake
from store.lakefiles import Manifest, write_manifest
from store.lakeparquet import attribute_maps, file_version
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
UTC = dt.UTC
# GOLDEN as a lake reader sees it, written out by hand: ts a UTC datetime, attributes (key, value) pairs in order.
SEEN = [
    (dt.datetime(2026, 11, 17, 23, 59, 59, 999_000, UTC), "a", "n1", "0", "accelerator.power", 350.5, ()),
    (dt.datetime(2026, 11, 18, 0, 0, 0, 5_000, UTC), "a", "n1", "", "serving.requests", 7.0,
     (("model", 'm, "x"'), ("outcome", "ok"))),
    (dt.datetime(2026, 11, 18, 0, 0, 0, 6_000, UTC), "a", "n1", "0", "accelerator.power", 351.0, ()),
    (dt.datetime(2026, 11, 18, 0, 0, 0, 10_000, UTC), "b", "n2", "1", "accelerator.power", 120.0, ()),
    (dt.datetime(2026, 11, 19, 0, 0, 0, 1_000, UTC), "a", "n1", "0", "accelerator.utilization", 0.25, ()),
]


def seen(row: tuple[object, ...]) -> tuple[object, ...]:
    """A row the store holds (epoch milliseconds, JSON text) as a lake reader should see it."""
    ts, *middle, attributes = row
    assert isinstance(ts, int) and isinstance(attributes, str)
    when = dt.datetime(1970, 1, 1, tzinfo=UTC) + dt.timedelta(milliseconds=ts)
    return (when, *middle, tuple(json.loads(attributes).items()))


def pairs(attributes: object) -> tuple[tuple[str, str], ...]:
    """A map as DuckDB and Polars (a dict) or pyarrow (a list of pairs) return it, its order kept."""
    return tuple(attributes.items()) if isinstance(attributes, dict) else tuple(attributes)  # type: ignore[arg-type]


def add(con: duckdb.DuckDBPyConnection, rows: Sequence[tuple[object, ...]]) -> None:
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
    rows = [(*r[:-1], pairs(r[-1])) for r in duckdb.sql(
        f"SELECT {', '.join(COLS)} FROM read_parquet('{glob}', hive_partitioning = true)").fetchall()]
    assert len(rows) == len(set(rows)), "a row was written twice"
    return set(rows)


def by_polars(folder: Path) -> list[tuple[object, ...]]:
    frame = pl.scan_parquet(folder / "**" / "*.parquet", hive_partitioning=True).select(COLS).collect()
    assert frame.schema["ts"] == pl.Datetime("ms", "UTC")
    return sorted((*r[:-1], pairs(r[-1])) for r in frame.rows())


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
    assert by_duckdb(lake) == set(SEEN)
    assert by_polars(lake) == sorted(SEEN)
    dates = duckdb.sql(f"SELECT DISTINCT date::VARCHAR, typeof(date) FROM read_parquet('{lake}/**/*.parquet', "
                       "hive_partitioning = true) ORDER BY 1").fetchall()
    assert dates == [("2026-11-17", "DATE"), ("2026-11-18", "DATE"), ("2026-11-19", "DATE")]
    schema = json.loads((lake / "_schema.json").read_text())
    assert schema["metric_catalog"]["version"] == "1" and schema["hetpool_version"] == "9.9.9"
    assert schema["metric_catalog"]["metrics"]["accelerator.power"] == {"unit": "W", "kind": "gauge"}
    assert schema["schema_version"] == 2
    declared = [(c["name"], c["type"]) for c in schema["columns"]]
    one = lake / "date=2026-11-18" / "pool=a" / "part-0.parquet"
    in_file = duckdb.sql(f"DESCRIBE SELECT * FROM read_parquet('{one}', hive_partitioning = false)").fetchall()
    assert [(r[0], r[1]) for r in in_file] == declared == [
        ("ts", "TIMESTAMP WITH TIME ZONE"), ("pool", "VARCHAR"), ("node", "VARCHAR"), ("device", "VARCHAR"),
        ("metric", "VARCHAR"), ("value", "DOUBLE"), ("attributes", "MAP(VARCHAR, VARCHAR)")]
    manifest = json.loads((lake / "_manifest.json").read_text())
    assert {k: v["rows"] for k, v in manifest["partitions"].items()} == dict(zip(PARTS, [1, 2, 1, 1], strict=True))


ARROW = [("ts", pa.timestamp("ms", tz="UTC")), ("pool", pa.string()), ("node", pa.string()),
         ("device", pa.string()), ("metric", pa.string()), ("value", pa.float64()),
         ("attributes", pa.map_(pa.string(), pa.string()))]


def test_every_file_has_exactly_the_declared_parquet_types(filled: duckdb.DuckDBPyConnection,
                                                           tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    write_lake(Held(filled), lake)
    declared = [(c["name"], c["arrow"]) for c in json.loads((lake / "_schema.json").read_text())["columns"]]
    assert declared == [("ts", "timestamp[ms, tz=UTC]"), ("pool", "string"), ("node", "string"), ("device", "string"),
                        ("metric", "string"), ("value", "double"), ("attributes", "map<string, string>")]
    for path in sorted(lake.rglob("*.parquet")):
        schema = pq.read_schema(path)
        assert [(f.name, f.type) for f in schema] == ARROW, path
        assert str(schema.field("ts").type) == "timestamp[ms, tz=UTC]"
        assert schema.field("attributes").type.key_type == schema.field("attributes").type.item_type == pa.string()
        # what Spark and Trino read: the Parquet logical types, a millisecond timestamp adjusted to UTC and a MAP
        columns = pq.ParquetFile(path).schema
        ts = columns.column(0).logical_type
        logical = json.loads(ts.to_json())
        assert (ts.type, logical["isAdjustedToUTC"], logical["timeUnit"]) == ("TIMESTAMP", True, "milliseconds")
        assert columns.column(0).physical_type == "INT64" and columns.column(6).physical_type == "BYTE_ARRAY"
        assert "optional group field_id=-1 attributes (Map)" in str(columns)
        assert columns.column(6).path == "attributes.key_value.key" and columns.column(7).path.endswith(".value")
        assert columns.to_arrow_schema().field("attributes").type == pa.map_(pa.string(), pa.string())
        assert file_version(path) == 2
    hourly = tmp_path / "hourly"
    write_lake(Held(filled), hourly, ExportFilter(resolution="1h"))
    for path in hourly.rglob("*.parquet"):
        assert [(f.name, f.type) for f in pq.read_schema(path)] == [
            *ARROW, ("min", pa.float64()), ("max", pa.float64()), ("last", pa.float64()), ("count", pa.int64())]


def test_a_partition_of_many_batches_is_written_whole_in_order(filled: duckdb.DuckDBPyConnection, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("store.lakeparquet.BATCH_ROWS", 1)  # every row its own batch and row group
    lake = tmp_path / "lake"
    write_lake(Held(filled), lake)
    one = pq.ParquetFile(lake / "date=2026-11-18" / "pool=a" / "part-0.parquet")
    assert one.metadata.num_row_groups == 2
    assert one.read(columns=["ts", "attributes"]).to_pylist() == [
        {"ts": SEEN[1][0], "attributes": list(SEEN[1][6])}, {"ts": SEEN[2][0], "attributes": []}]
    assert by_duckdb(lake) == set(SEEN)


def test_map_keys_are_sorted_whatever_the_stored_text(con: duckdb.DuckDBPyConnection, tmp_path: Path) -> None:
    con.execute("INSERT INTO samples (ts, pool, node, device, metric, value, attributes) VALUES "
                "(?, 'a', 'n1', '', 'serving.requests', 1.0, ?)", [T, '{"zone": "z1", "engine": "vllm", "a": ""}'])
    lake = tmp_path / "lake"
    write_lake(Held(con), lake)
    assert pq.read_table(lake / "date=2026-11-18" / "pool=a" / "part-0.parquet")["attributes"].to_pylist() == [
        [("a", ""), ("engine", "vllm"), ("zone", "z1")]]


@pytest.mark.parametrize(("texts", "maps"), [
    (['{"b":"2","a":"1"}', "{}", '{"b":"2","a":"1"}'], [[("a", "1"), ("b", "2")], [], [("a", "1"), ("b", "2")]]),
    (['{"n": 3, "ok": true, "x": null, "s": "t"}'], [[("n", "3"), ("ok", "true"), ("s", "t"), ("x", "null")]]),
    (['{"k": "\u00e9, \\"q\\""}'], [[("k", '\u00e9, "q"')]]),
])
def test_attribute_texts_become_maps_with_sorted_keys(texts: list[str], maps: list[object]) -> None:
    got = attribute_maps(pa.array(texts))
    assert got.type == pa.map_(pa.string(), pa.string()) and got.to_pylist() == maps


@pytest.mark.parametrize(("text", "message"), [
    ('{"a": ', "Expecting value"),
    ("[1, 2]", "attributes '[1, 2]' are not a JSON object"),
    ('"text"', "attributes '\"text\"' are not a JSON object"),
])
def test_attributes_that_are_no_json_object_fail_the_partition_and_leave_no_file(
        con: duckdb.DuckDBPyConnection, tmp_path: Path, text: str, message: str) -> None:
    con.execute("INSERT INTO samples (ts, pool, node, device, metric, value, attributes) VALUES "
                "(?, 'a', 'n1', '', 'serving.requests', 1.0, ?)", [T, text])
    lake = tmp_path / "lake"
    final = lake / "date=2026-11-18" / "pool=a" / "part-0.parquet"
    with pytest.raises(StoreError, match=re.escape(f"export to {str(final)!r} failed: ") + ".*" + re.escape(message)):
        write_lake(Held(con), lake)
    assert not [p for p in lake.rglob("*") if p.is_file() and p.suffix in (".parquet", ".tmp")]


def test_pyarrow_dataset_filters_a_partition_a_time_range_and_an_attribute(filled: duckdb.DuckDBPyConnection,
                                                                           tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    write_lake(Held(filled), lake)
    write_lake(Held(filled), lake, ExportFilter(start_ms=T))  # a second run over the same days adds no row
    dataset = ds.dataset(lake, format="parquet", partitioning="hive")  # skips _schema.json and _manifest.json
    assert dataset.count_rows() == 5
    assert dataset.schema.field("ts").type == pa.timestamp("ms", tz="UTC")
    day = ds.field("date") == "2026-11-18"
    assert dataset.count_rows(filter=day) == 3 and dataset.count_rows(filter=day & (ds.field("pool") == "b")) == 1
    since = pa.scalar(dt.datetime(2026, 11, 18, 0, 0, 0, 6_000, UTC), pa.timestamp("ms", tz="UTC"))
    until = pa.scalar(dt.datetime(2026, 11, 19, 0, 0, 0, 1_000, UTC), pa.timestamp("ms", tz="UTC"))
    window = (ds.field("ts") >= since) & (ds.field("ts") < until)  # 00:00:00.006 to 2026-11-19 00:00:00.001
    got = dataset.to_table(columns=["pool", "metric", "value"], filter=window).sort_by("value").to_pylist()
    assert got == [{"pool": "b", "metric": "accelerator.power", "value": 120.0},
                   {"pool": "a", "metric": "accelerator.power", "value": 351.0}]
    outcome = pc.map_lookup(ds.field("attributes"), pa.scalar("outcome"), "first")
    got = dataset.to_table(columns=["ts", "node", "value", "attributes"], filter=day & (outcome == "ok")).to_pylist()
    assert got == [{"ts": dt.datetime(2026, 11, 18, 0, 0, 0, 5_000, UTC), "node": "n1", "value": 7.0,
                    "attributes": [("model", 'm, "x"'), ("outcome", "ok")]}]


def test_duckdb_filters_a_partition_a_time_range_and_an_attribute(filled: duckdb.DuckDBPyConnection,
                                                                  tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    write_lake(Held(filled), lake)
    add(filled, [(T + 7, "a", "n1", "", "serving.requests", 2.0, '{"outcome":"error"}')])
    assert write_lake(Held(filled), lake).written == 1  # the rewritten partition replaces its file
    source = f"read_parquet('{lake}/**/*.parquet', hive_partitioning = true)"
    assert duckdb.sql(f"SELECT count(*), count(DISTINCT (ts, node, device, metric)) FROM {source}").fetchall() == [
        (6, 6)]
    query = (f"SELECT epoch_ms(ts), metric, value, attributes['model'] FROM {source} "
             "WHERE date = DATE '2026-11-18' AND pool = 'a' "
             "AND ts >= TIMESTAMPTZ '2026-11-18 00:00:00.005+00' AND ts < TIMESTAMPTZ '2026-11-18 00:00:01+00' "
             "AND attributes['outcome'] = ? ORDER BY ts")
    assert duckdb.sql(query, params=["ok"]).fetchall() == [(T + 5, "serving.requests", 7.0, 'm, "x"')]
    assert duckdb.sql(query, params=["error"]).fetchall() == [(T + 7, "serving.requests", 2.0, None)]
    # in any session time zone, the literal's +00 keeps the window in UTC
    local = duckdb.connect()
    local.execute("SET TimeZone = 'America/New_York'")
    assert local.execute(query, ["ok"]).fetchall() == [(T + 5, "serving.requests", 7.0, 'm, "x"')]
    local.close()


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
    assert by_duckdb(lake) == {*SEEN, seen(late)}


def test_a_changed_value_with_the_same_row_count_is_a_change(filled: duckdb.DuckDBPyConnection,
                                                             tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    write_lake(Held(filled), lake)
    filled.execute("UPDATE samples SET value = 121.0 WHERE pool = 'b'")
    assert write_lake(Held(filled), lake).written == 1
    assert seen((T + 10, "b", "n2", "1", "accelerator.power", 121.0, "{}")) in by_duckdb(lake)


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
    assert by_duckdb(lake) == {SEEN[0]}  # the first partition, whole; the second nowhere
    assert not [p for p in lake.rglob("*.tmp")]
    again = write_lake(Held(filled), lake)
    assert (again.written, again.unchanged) == (3, 1)
    assert by_duckdb(lake) == set(SEEN) and by_polars(lake) == sorted(SEEN)


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
    assert by_duckdb(lake) == set(SEEN[:3]) and by_polars(lake) == sorted(SEEN[:3])
    again = write_lake(Store(db_path), lake)
    assert again.written == 4  # no manifest survived the kill: every partition is written again, whole
    assert by_duckdb(lake) == set(SEEN) and not list(lake.rglob("*.tmp"))


def test_partitions_the_store_pruned_stay_in_the_lake(filled: duckdb.DuckDBPyConnection, tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    write_lake(Held(filled), lake)
    prune_raw(filled, keep_ms=DAY, now_ms=T + 2 * DAY)  # raw samples before 2026-11-19 00:00 are gone
    assert filled.execute("SELECT count(*) FROM samples").fetchall() == [(1,)]
    again = write_lake(Held(filled), lake)
    assert (again.written, again.unchanged, again.kept) == (0, 1, 3)
    assert by_duckdb(lake) == set(SEEN)


def test_window_and_filters_narrow_what_is_written(filled: duckdb.DuckDBPyConnection, tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    result = write_lake(Held(filled), lake, ExportFilter(start_ms=T + 6, end_ms=T + 7, pools=("a",)))
    assert (result.rows, result.written) == (2, 1)  # the window picks its day, and the day is written whole
    assert by_duckdb(lake) == set(SEEN[1:3])
    more = write_lake(Held(filled), lake, ExportFilter(start_ms=T + DAY))
    assert (more.rows, more.written, more.kept) == (1, 1, 1)
    assert by_duckdb(lake) == {*SEEN[1:3], SEEN[4]}
    empty = write_lake(Held(filled), tmp_path / "empty", ExportFilter(start_ms=T + 9 * DAY, pools=("b",)))
    assert (empty.rows, empty.written) == (0, 0)  # a known pool with nothing in the window is no error


def test_an_hourly_lake_carries_the_rollup_columns(filled: duckdb.DuckDBPyConnection, tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    write_lake(Held(filled), lake, ExportFilter(resolution="1h"))
    got = duckdb.sql(f"SELECT ts, value, min, max, last, count FROM '{lake}/date=2026-11-18/pool=a/*.parquet' "
                     "WHERE metric = 'accelerator.power'").fetchall()
    assert got == [(dt.datetime(2026, 11, 18, tzinfo=UTC), 351.0, 351.0, 351.0, 351.0, 1)]
    names = [c["name"] for c in json.loads((lake / "_schema.json").read_text())["columns"]]
    assert names == [*COLS, "min", "max", "last", "count"]


H29 = T + 11 * DAY + 8 * 3_600_000  # 2026-11-29 08:00 UTC, the hour the README's query reads
README_ROWS = [  # the two rows it finds, then one that each condition leaves out
    (H29 + 1_000, "h100-a", "n1", "0", "accelerator.utilization", 0.5, '{"engine":"tensor"}'),
    (H29 + 1_800_000, "h100-a", "n2", "1", "accelerator.utilization", 0.75, '{"engine":"tensor"}'),
    (H29 + 3_600_000, "h100-a", "n1", "0", "accelerator.utilization", 0.1, '{"engine":"tensor"}'),  # 09:00: end
    (H29 - 1, "h100-a", "n1", "0", "accelerator.utilization", 0.2, '{"engine":"tensor"}'),  # 07:59:59.999
    (H29 + 1_000, "h100-b", "n3", "0", "accelerator.utilization", 0.3, '{"engine":"tensor"}'),  # another pool
    (H29 + 1_000, "h100-a", "n1", "0", "accelerator.utilization", 0.4, '{"engine":"sm"}'),  # another engine
    (H29 + 1_000, "h100-a", "n1", "0", "accelerator.power", 300.0, "{}"),  # another metric
    (H29 + DAY, "h100-a", "n1", "0", "accelerator.utilization", 0.6, '{"engine":"tensor"}'),  # another day
]


def test_the_readme_query_reads_its_partition_hour_and_attribute(con: duckdb.DuckDBPyConnection,
                                                                 tmp_path: Path) -> None:
    text = (REPO / "docs" / "cli.md").read_text(encoding="utf-8")
    found = re.search(r"```sql\n(SELECT .*?read_parquet\('lake/.*?;)\n```", text, re.S)
    assert found, "the lake section of docs/cli.md has no DuckDB query"
    add(con, README_ROWS)
    lake = tmp_path / "lake"
    write_lake(Held(con), lake)
    query = found[1].replace("'lake/", f"'{lake}/")
    local = duckdb.connect()
    for zone in ("UTC", "Asia/Tokyo"):
        local.execute(f"SET TimeZone = '{zone}'")
        got = [(r[0].astimezone(UTC), *r[1:]) for r in local.execute(query).fetchall()]
        assert got == [(dt.datetime(2026, 11, 29, 8, 0, 1, tzinfo=UTC), "n1", "0", 0.5),
                       (dt.datetime(2026, 11, 29, 8, 30, tzinfo=UTC), "n2", "1", 0.75)], zone
    local.close()


def version_1_lake(con: duckdb.DuckDBPyConnection, lake: Path) -> None:
    """The lake as the first schema version wrote it: ts int64, attributes JSON text, no schema_version."""
    lake.mkdir()
    found = fingerprints(con, ExportFilter(), "raw")
    for day, pool in found:
        folder = lake / partition_key(day, pool)
        folder.mkdir(parents=True)
        con.execute(f"COPY (SELECT ts, pool, node, device, metric, value, attributes FROM samples WHERE ts >= ? AND "
                    f"ts < ? AND pool = ? ORDER BY ts) TO '{folder / 'part-0.parquet'}' (FORMAT parquet)",
                    [day * DAY, (day + 1) * DAY, pool])
    write_manifest(lake, Manifest("raw", (), {partition_key(d, p): fp for (d, p), fp in found.items()}))
    (lake / "_schema.json").write_text(json.dumps({"resolution": "raw", "columns": [
        {"name": "ts", "type": "BIGINT"}, {"name": "attributes", "type": "VARCHAR"}]}))


def test_a_version_1_lake_is_upgraded_in_place_pruned_days_included(filled: duckdb.DuckDBPyConnection,
                                                                    tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    version_1_lake(filled, lake)
    assert {file_version(p) for p in lake.rglob("*.parquet")} == {1}
    assert duckdb.sql(f"SELECT typeof(ts), typeof(attributes) FROM '{lake}/**/*.parquet' LIMIT 1").fetchall() == [
        ("BIGINT", "VARCHAR")]
    prune_raw(filled, keep_ms=DAY, now_ms=T + 2 * DAY)  # three of the four partitions live only in the lake now
    result = write_lake(Held(filled), lake)
    assert (result.upgraded, result.written, result.unchanged, result.kept) == (4, 0, 1, 3)
    assert {file_version(p) for p in lake.rglob("*.parquet")} == {2}
    assert json.loads((lake / "_schema.json").read_text())["schema_version"] == 2
    assert by_duckdb(lake) == set(SEEN) and by_polars(lake) == sorted(SEEN)
    assert not list(lake.rglob("*.tmp"))
    again = write_lake(Held(filled), lake)
    assert (again.upgraded, again.written) == (0, 0)


def test_an_hourly_version_1_lake_is_upgraded_with_its_rollup_columns(filled: duckdb.DuckDBPyConnection,
                                                                      tmp_path: Path) -> None:
    lake, hourly = tmp_path / "lake", ExportFilter(resolution="1h")
    write_lake(Held(filled), lake, hourly)
    for path in lake.rglob("*.parquet"):  # back to version 1's types, as that version wrote an hourly lake
        duckdb.sql(f"COPY (SELECT epoch_ms(ts) AS ts, pool, node, device, metric, value, to_json(attributes)::VARCHAR "
                   f"AS attributes, min, max, last, count FROM '{path}') TO '{path}' (FORMAT parquet)")
    schema = json.loads((lake / "_schema.json").read_text())
    (lake / "_schema.json").write_text(json.dumps({k: v for k, v in schema.items() if k != "schema_version"}))
    assert {file_version(p) for p in lake.rglob("*.parquet")} == {1}
    result = write_lake(Held(filled), lake, hourly)
    assert (result.upgraded, result.written, result.unchanged) == (4, 0, 4)
    got = duckdb.sql(f"SELECT epoch_ms(ts), metric, value, min, max, last, count, attributes "
                     f"FROM '{lake}/**/*.parquet' WHERE pool = 'a' ORDER BY ts, metric").fetchall()
    assert got == [(T - 3_600_000, "accelerator.power", 350.5, 350.5, 350.5, 350.5, 1, {}),
                   (T, "accelerator.power", 351.0, 351.0, 351.0, 351.0, 1, {}),
                   (T, "serving.requests", 7.0, 7.0, 7.0, 7.0, 1, {"model": 'm, "x"', "outcome": "ok"}),
                   (T + DAY, "accelerator.utilization", 0.25, 0.25, 0.25, 0.25, 1, {})]


def test_the_scheduled_export_says_it_upgraded_the_lake(filled: duckdb.DuckDBPyConnection, tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    version_1_lake(filled, lake)
    lines: list[str] = []
    export = LakeExport(Held(filled), ExportPlan(lake, 3600.0), log=lines.append)
    export.run_once()
    export.run_once()
    assert lines == [f"export: rewrote 4 partitions of an earlier lake schema version in {lake}"]
    assert export.report()["runs"] == 2 and export.report()["failures"] == 0


def test_an_upgrade_that_fails_midway_resumes_and_names_the_old_version_until_done(
        filled: duckdb.DuckDBPyConnection, tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    version_1_lake(filled, lake)
    renames: list[Path] = []

    def fail_on_the_second_file(src: Path, dst: Path) -> None:
        if dst.name == "part-0.parquet":
            renames.append(dst)
            if len(renames) == 2:
                raise OSError(28, "No space left on device")
        os.replace(src, dst)

    with pytest.raises(OSError, match="No space left"):
        write_lake(Held(filled), lake, replace=fail_on_the_second_file)
    versions = [file_version(p) for p in sorted(lake.rglob("*.parquet"))]
    assert versions == [2, 1, 1, 1] and "schema_version" not in json.loads((lake / "_schema.json").read_text())
    assert not list(lake.rglob("*.tmp"))
    again = write_lake(Held(filled), lake)
    assert (again.upgraded, again.written, again.unchanged) == (3, 0, 4)
    assert by_duckdb(lake) == set(SEEN)


@pytest.mark.parametrize(("flt", "prepare", "message"), [
    (ExportFilter(pools=("mi300x-b",)), None, "unknown pool 'mi300x-b'; known: a, b"),
    (ExportFilter(metrics=("accelerator.pwr",)), None, "unknown metric 'accelerator.pwr'; known: accelerator.clock, "),
    (ExportFilter(resolution="5m"), None, "unknown resolution '5m'; known: auto, raw, 1m, 1h"),
    (ExportFilter(resolution="1m"), "raw-lake", "holds raw rows, this export asks for 1m; pass --resolution raw"),
    (ExportFilter(), "power-lake", "holds only accelerator.power, this export asks for every metric; pick another"),
    (ExportFilter(), "foreign", "holds files but no _manifest.json"),
    (ExportFilter(), "file", "is a file; a partitioned export goes to a folder"),
    (ExportFilter(), "bad-manifest", "is not a lake manifest (no field 'resolution'); move it away"),
    (ExportFilter(), "newer-schema", "has lake schema version 3 (its _schema.json); this hetpool writes version 2: "
                                     "update hetpool"),
    (ExportFilter(), "bad-schema", "_schema.json' is not a lake schema (schema_version '2' is not a number)"),
    (ExportFilter(), "foreign-file", "date=2026-11-18/pool=a/part-0.parquet' has ts string and attributes string: "
                                     "neither lake schema version 1 (int64, string) nor version 2 "
                                     "(timestamp[ms, tz=UTC], map<string, string>)"),
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
    elif prepare in ("newer-schema", "bad-schema"):
        write_lake(Held(filled), lake)
        (lake / "_schema.json").write_text(json.dumps({"schema_version": 3 if prepare == "newer-schema" else "2"}))
    elif prepare == "foreign-file":
        version_1_lake(filled, lake)
        one = lake / "date=2026-11-18" / "pool=a" / "part-0.parquet"
        duckdb.sql(f"COPY (SELECT ts::VARCHAR AS ts, attributes FROM '{one}') TO '{one}' (FORMAT parquet)")
    with pytest.raises(StoreError, match=re.escape(message)):
        write_lake(Held(filled), lake, flt)
    if prepare is None:
        assert not lake.exists()
