"""The lake's Parquet files: their columns and types, writing one from a query, and upgrading older ones.

Lake schema version 2 writes `ts` as a Parquet TIMESTAMP (milliseconds, adjusted to UTC; Arrow
timestamp[ms, tz=UTC]) and `attributes` as a MAP of strings to strings with its keys sorted, so Spark, Trino,
DuckDB and Polars read both without conversions. Version 1 wrote `ts` as int64 epoch milliseconds and
`attributes` as JSON text; `upgrade` rewrites such files in place, each atomically, as the lake's next run finds
them. DuckDB's own Parquet writer has no millisecond UTC timestamp (it writes microseconds), so the rows go
through Arrow: DuckDB streams them in batches and pyarrow writes the file with the declared schema.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from store.errors import StoreError
from store.lakefiles import SCHEMA_VERSION, Replace, temp_name

TS_TYPE = pa.timestamp("ms", tz="UTC")
ATTRIBUTES_TYPE = pa.map_(pa.string(), pa.string())
# name, DuckDB's type as it reads the file back, Arrow's type as written
COLUMNS = (("ts", "TIMESTAMP WITH TIME ZONE", TS_TYPE), ("pool", "VARCHAR", pa.string()),
           ("node", "VARCHAR", pa.string()), ("device", "VARCHAR", pa.string()),
           ("metric", "VARCHAR", pa.string()), ("value", "DOUBLE", pa.float64()),
           ("attributes", "MAP(VARCHAR, VARCHAR)", ATTRIBUTES_TYPE))
ROLLUP_COLUMNS = (("min", "DOUBLE", pa.float64()), ("max", "DOUBLE", pa.float64()),
                  ("last", "DOUBLE", pa.float64()), ("count", "BIGINT", pa.int64()))
# The store's attributes (and a version-1 file's) are canonical JSON text: as a map, keys sorted whatever the text.
ATTRIBUTES_SQL = ("map_from_entries(list_sort(map_entries("
                  "CAST(CAST(attributes AS JSON) AS MAP(VARCHAR, VARCHAR)))))")
BATCH_ROWS = 65_536  # rows per Arrow batch: bounds the memory a partition takes while it is written


def columns(resolution: str) -> tuple[tuple[str, str, pa.DataType], ...]:
    """The file columns of a lake at this resolution, with their DuckDB and Arrow types."""
    return COLUMNS if resolution == "raw" else COLUMNS + ROLLUP_COLUMNS


def arrow_schema(resolution: str) -> pa.Schema:
    """The Arrow schema every file of a lake at this resolution is written with."""
    return pa.schema([(name, arrow) for name, _, arrow in columns(resolution)])


def write_rows(con: duckdb.DuckDBPyConnection, query: str, params: list[object], target: Path,
               resolution: str, final: Path | None = None) -> int:
    """Write the rows of `query` (ts as epoch milliseconds, attributes already a map) to `target`, the temporary
    name of `final`; the row count. A failure removes `target`."""
    schema = arrow_schema(resolution)
    rows = 0
    try:
        reader = con.sql(query, params=params).to_arrow_reader(BATCH_ROWS)
        with pq.ParquetWriter(target, schema) as writer:
            for batch in reader:
                writer.write_batch(batch.cast(schema))  # int64 milliseconds to timestamp[ms, UTC]: same values
                rows += batch.num_rows
    except (duckdb.Error, pa.ArrowException, OSError) as exc:
        target.unlink(missing_ok=True)
        raise StoreError(f"export to {str(final or target)!r} failed: {exc}") from exc
    return rows


def file_version(path: Path) -> int:
    """The lake schema version a partition file was written with, from its Parquet footer."""
    try:
        schema = pq.read_schema(path)
        ts, attributes = schema.field("ts").type, schema.field("attributes").type
    except (pa.ArrowException, KeyError, OSError) as exc:
        raise StoreError(f"{str(path)!r} is not a lake partition file ({exc})") from None
    if ts == pa.int64() and attributes == pa.string():
        return 1
    if ts == TS_TYPE and attributes == ATTRIBUTES_TYPE:
        return 2
    raise StoreError(f"{str(path)!r} has ts {ts} and attributes {attributes}: neither lake schema version 1 (int64, "
                     f"string) nor version {SCHEMA_VERSION} ({TS_TYPE}, {ATTRIBUTES_TYPE}); move it out of the lake")


def upgrade(paths: Iterable[Path], resolution: str, replace: Replace = os.replace) -> int:
    """Rewrite every version-1 file among `paths` in version 2, each through a temporary file and a rename;
    how many were rewritten. Files already in version 2 are left as they are, so a killed upgrade resumes."""
    old = [p for p in paths if file_version(p) == 1]
    if not old:
        return 0
    stats = "".join(f", {name}" for name, _, _ in columns(resolution)[len(COLUMNS):])
    query = (f"SELECT ts, pool, node, device, metric, value, {ATTRIBUTES_SQL} AS attributes{stats} "
             "FROM read_parquet(?) AS f ORDER BY f.ts, f.node, f.device, f.metric, f.attributes")
    con = duckdb.connect()  # in memory: the old files are the only input, the store is not read
    try:
        for path in old:
            tmp = temp_name(path)
            write_rows(con, query, [str(path)], tmp, resolution, path)
            try:
                replace(tmp, path)
            except BaseException:
                tmp.unlink(missing_ok=True)
                raise
    finally:
        con.close()
    return len(old)
