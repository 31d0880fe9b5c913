"""The lake's Parquet files: their columns and types, writing one from a query, and upgrading older ones.

Lake schema version 2 writes `ts` as a Parquet TIMESTAMP (milliseconds, adjusted to UTC; Arrow
timestamp[ms, tz=UTC]) and `attributes` as a MAP of strings to strings with its keys sorted, so Spark, Trino,
DuckDB and Polars read both without conversions. Version 1 wrote `ts` as int64 epoch milliseconds and
`attributes` as JSON text; `upgrade` rewrites such files in place, each atomically, as the lake's next run finds
them. DuckDB's own Parquet writer has no millisecond UTC timestamp (it writes microseconds), so the rows go
through Arrow: DuckDB streams them in batches, as the store holds them, and pyarrow writes the file with the
declared schema, parsing each distinct attributes text of a batch once (a batch holds few).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from store.exceptions import StoreError
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
BATCH_ROWS = 122_880  # rows per Arrow batch and so per row group (DuckDB's own size); bounds a write's memory


def columns(resolution: str) -> tuple[tuple[str, str, pa.DataType], ...]:
    """The file columns of a lake at this resolution, with their DuckDB and Arrow types."""
    return COLUMNS if resolution == "raw" else COLUMNS + ROLLUP_COLUMNS


def arrow_schema(resolution: str) -> pa.Schema:
    """The Arrow schema every file of a lake at this resolution is written with."""
    return pa.schema([(name, arrow) for name, _, arrow in columns(resolution)])


def attribute_maps(texts: pa.Array) -> pa.Array:
    """JSON objects as text to maps of strings with sorted keys; each distinct text is parsed once."""
    encoded = pc.dictionary_encode(texts)
    maps = [_pairs(text) for text in encoded.dictionary.to_pylist()]
    return pa.array(maps, type=ATTRIBUTES_TYPE).take(encoded.indices)


def _pairs(text: str) -> list[tuple[str, str]]:
    body = json.loads(text)
    if not isinstance(body, dict):
        raise ValueError(f"attributes {text!r} are not a JSON object")
    # canonical attributes are strings; anything else keeps its JSON text rather than failing the export
    return sorted((k, v if isinstance(v, str) else json.dumps(v)) for k, v in body.items())


def typed(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """A batch as the store holds rows (ts epoch milliseconds, attributes JSON text) in the lake's types."""
    arrays = []
    for field in schema:
        column = batch.column(field.name)
        if field.name == "attributes":
            column = attribute_maps(column)
        arrays.append(column.cast(field.type))  # ts: int64 to timestamp[ms, UTC], the same numbers
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def write_rows(con: duckdb.DuckDBPyConnection, query: str, params: list[object], target: Path,
               resolution: str, final: Path | None = None) -> int:
    """Write the rows of `query` (as the store holds them) to `target`, the temporary name of `final`; the row
    count. A failure removes `target`."""
    schema = arrow_schema(resolution)
    rows = 0
    try:
        reader = con.sql(query, params=params).to_arrow_reader(BATCH_ROWS)
        with pq.ParquetWriter(target, schema) as writer:
            for batch in reader:
                writer.write_batch(typed(batch, schema))
                rows += batch.num_rows
    except (duckdb.Error, pa.ArrowException, OSError, ValueError) as exc:
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
    names = ", ".join(name for name, _, _ in columns(resolution))
    query = f"SELECT {names} FROM read_parquet(?) ORDER BY ts, node, device, metric, attributes"
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
