"""The normalized feed out of the store: CSV, JSONL or Parquet (one file, or Hive-partitioned by date/pool).

Columns are ts, pool, node, device, metric, value, attributes. ts is epoch milliseconds (UTC) as an integer
in every format. attributes is a JSON object: an object in JSONL, JSON text in CSV and Parquet.

Long windows, and windows older than the raw retention horizon, come from the rollups: ts is then the bucket
start, value the bucket's average, and min, max, last and count follow as extra columns.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import duckdb
import polars as pl

from canonical.metrics import METRICS
from canonical.timeunits import DAY_MS
from store.db import fetch_one
from store.exceptions import StoreError
from store.rollups import raw_horizon
from store.snapshots import latest_registry

FORMATS = ("csv", "jsonl", "parquet")
RESOLUTIONS = ("auto", "raw", "1m", "1h")
RAW_UP_TO_MS = 2 * DAY_MS      # auto: raw rows for windows up to 2 days...
MINUTES_UP_TO_MS = 14 * DAY_MS  # ...1-minute buckets up to 14 days, hourly beyond
SOURCES = {"raw": ("samples", "ts", "value", ""),
            "1m": ("rollup_1m", "bucket", "avg", ", min, max, last, count"),
            "1h": ("rollup_1h", "bucket", "avg", ", min, max, last, count")}
_ORDER = "ORDER BY ts, pool, node, device, metric, attributes"


@dataclass(frozen=True)
class ExportFilter:
    """Which rows to export: a window [start, end), pools and metrics (empty: all), and a resolution."""

    start_ms: int | None = None
    end_ms: int | None = None
    pools: tuple[str, ...] = ()
    metrics: tuple[str, ...] = ()
    resolution: str = "auto"

    def where(self, time_col: str = "ts") -> tuple[str, list[object]]:
        """SQL condition and its parameters."""
        parts: list[str] = []
        params: list[object] = []
        for sql, value in ((f"{time_col} >= ?", self.start_ms), (f"{time_col} < ?", self.end_ms)):
            if value is not None:
                parts.append(sql)
                params.append(value)
        for col, values in (("pool", self.pools), ("metric", self.metrics)):
            if values:
                parts.append(f"{col} IN ({', '.join('?' * len(values))})")
                params.extend(values)
        return (" AND ".join(parts) or "TRUE"), params


@dataclass(frozen=True)
class ExportResult:
    """What was written."""

    rows: int
    path: str
    partitioned: bool
    resolution: str


def resolve(con: duckdb.DuckDBPyConnection, flt: ExportFilter) -> str:
    """The resolution 'auto' stands for: raw while the window is short and its raw samples are kept."""
    if flt.resolution not in RESOLUTIONS:
        raise StoreError(f"unknown resolution '{flt.resolution}'; known: {', '.join(RESOLUTIONS)}")
    if flt.resolution != "auto":
        return flt.resolution
    span = fetch_one(con, "SELECT min(bucket), max(bucket) + 3600000 FROM rollup_1h")
    start = flt.start_ms if flt.start_ms is not None else (span[0] if span and span[0] is not None else 0)
    end = flt.end_ms if flt.end_ms is not None else (span[1] if span and span[1] is not None else start)
    horizon = raw_horizon(con)
    if end - start <= RAW_UP_TO_MS and (horizon is None or start >= horizon):
        return "raw"
    return "1m" if end - start <= MINUTES_UP_TO_MS else "1h"


def check_names(con: duckdb.DuckDBPyConnection, flt: ExportFilter) -> None:
    """Refuse a pool or metric nobody knows: a typo would otherwise be an empty export that looks fine.

    Known pools are the newest registry's and every pool with stored rows (raw or rolled up); known metrics
    are the canonical catalog's. A known pool with nothing in the window is no error."""
    unknown_metrics = [m for m in flt.metrics if m not in METRICS]
    if unknown_metrics:
        raise StoreError(f"unknown metric '{unknown_metrics[0]}'; known: {', '.join(sorted(METRICS))}")
    if not flt.pools:
        return
    rows = con.execute("SELECT DISTINCT pool FROM samples UNION SELECT DISTINCT pool FROM rollup_1h").fetchall()
    known = {str(r[0]) for r in rows}
    snapshot = latest_registry(con)
    if snapshot is not None:
        known.update(p.id for p in snapshot.registry.pools)
    unknown_pools = [p for p in flt.pools if p not in known]
    if unknown_pools:
        listed = ", ".join(sorted(known)) or "none (the store holds no samples and no registry)"
        raise StoreError(f"unknown pool '{unknown_pools[0]}'; known: {listed}")


# A spreadsheet runs a cell that starts with one of these as a formula; exporter labels are untrusted.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def _cell(col: str, for_spreadsheet: bool) -> str:
    if not for_spreadsheet:
        return col
    starts = ", ".join(f"chr({ord(c)})" for c in FORMULA_STARTS)
    return f"CASE WHEN left({col}, 1) IN ({starts}) THEN chr(39) || {col} ELSE {col} END AS {col}"


def export_query(con: duckdb.DuckDBPyConnection, flt: ExportFilter, *, json_attributes: bool = False,
                 with_date: bool = False, for_spreadsheet: bool = False) -> tuple[str, list[object], str]:
    """The SELECT of the feed rows for a filter, its parameters, and the resolution it reads.

    `for_spreadsheet` (CSV) quotes a pool, node or device name that a spreadsheet would run as a formula."""
    resolution = resolve(con, flt)
    table, time_col, value, stats = SOURCES[resolution]
    where, params = flt.where(time_col)
    attributes = "json(attributes) AS attributes" if json_attributes else "attributes"
    date = f", strftime(make_timestamp({time_col} * 1000), '%Y-%m-%d') AS date" if with_date else ""
    names = ", ".join(_cell(c, for_spreadsheet) for c in ("pool", "node", "device"))
    query = (f"SELECT {time_col} AS ts, {names}, metric, {value} AS value, {attributes}{stats}{date} "
             f"FROM {table} WHERE {where} {_ORDER}")
    return query, params, resolution


def export_count(con: duckdb.DuckDBPyConnection, flt: ExportFilter) -> tuple[int, str]:
    """How many rows an export of the filter holds, and the resolution it reads (no sort needed to count)."""
    resolution = resolve(con, flt)
    table, time_col, _, _ = SOURCES[resolution]
    where, params = flt.where(time_col)
    row = fetch_one(con, f"SELECT count(*) FROM {table} WHERE {where}", params)
    return (int(row[0]) if row else 0), resolution


def export_frame(con: duckdb.DuckDBPyConnection, flt: ExportFilter, limit: int | None = None,
                 for_spreadsheet: bool = False) -> pl.DataFrame:
    """The feed rows as a frame (the console's preview and download)."""
    query, params, _ = export_query(con, flt, for_spreadsheet=for_spreadsheet)
    if limit is not None:
        query, params = f"{query} LIMIT ?", [*params, limit]
    return con.sql(query, params=params).pl()


def sql_literal(path: Path) -> str:
    """A path as an SQL string literal (COPY takes no parameter for its target)."""
    return "'" + str(path).replace("'", "''") + "'"


def export_samples(con: duckdb.DuckDBPyConnection, fmt: str, out: str | Path,
                   flt: ExportFilter | None = None) -> ExportResult:
    """Write feed rows to `out`. Parquet to a directory (or a path without .parquet) is partitioned
    Hive-style as date=YYYY-MM-DD/pool=P/; that directory must be new or empty."""
    if fmt not in FORMATS:
        raise StoreError(f"unknown export format '{fmt}'; known: {', '.join(FORMATS)}")
    flt = flt or ExportFilter()
    check_names(con, flt)
    target = Path(out)
    partitioned = fmt == "parquet" and (target.is_dir() or target.suffix != ".parquet")
    if not target.parent.exists():
        raise StoreError(f"cannot write {str(target)!r}: folder {str(target.parent)!r} does not exist")
    if partitioned:
        if target.exists() and any(target.iterdir()):
            raise StoreError(f"export directory {str(target)!r} is not empty; pick a new one")
        query, params, resolution = export_query(con, flt, with_date=True)
        options = "FORMAT parquet, PARTITION_BY (date, pool), OVERWRITE_OR_IGNORE true"
    else:
        if target.is_dir():
            raise StoreError(f"{str(target)!r} is a directory; {fmt} exports go to one file")
        query, params, resolution = export_query(con, flt, json_attributes=fmt == "jsonl",
                                                 for_spreadsheet=fmt == "csv")
        options = {"csv": "FORMAT csv, HEADER true", "jsonl": "FORMAT json", "parquet": "FORMAT parquet"}[fmt]
    try:
        rows = con.execute(f"COPY ({query}) TO {sql_literal(target)} ({options})", params).fetchall()
    except duckdb.Error as exc:
        raise StoreError(f"export to {str(target)!r} failed: {exc}") from exc
    return ExportResult(int(rows[0][0]) if rows else 0, str(target), partitioned, resolution)
