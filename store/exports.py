"""The normalized feed out of the store: CSV, JSONL or Parquet (one file, or Hive-partitioned by date/pool).

Columns are ts, pool, node, device, metric, value, attributes. ts is epoch milliseconds (UTC) as an integer
in every format. attributes is a JSON object: an object in JSONL, JSON text in CSV and Parquet.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import duckdb

from store.errors import StoreError

FORMATS = ("csv", "jsonl", "parquet")


@dataclass(frozen=True)
class ExportFilter:
    """Which samples to export: a time window [start, end) and optionally one pool and one metric."""

    start_ms: int | None = None
    end_ms: int | None = None
    pool: str | None = None
    metric: str | None = None

    def where(self) -> tuple[str, list[object]]:
        """SQL condition and its parameters."""
        parts: list[str] = []
        params: list[object] = []
        for sql, value in (("ts >= ?", self.start_ms), ("ts < ?", self.end_ms), ("pool = ?", self.pool),
                           ("metric = ?", self.metric)):
            if value is not None:
                parts.append(sql)
                params.append(value)
        return (" AND ".join(parts) or "TRUE"), params


@dataclass(frozen=True)
class ExportResult:
    """What was written."""

    rows: int
    path: str
    partitioned: bool


def _literal(path: Path) -> str:
    """A path as an SQL string literal (COPY takes no parameter for its target)."""
    return "'" + str(path).replace("'", "''") + "'"


def export_samples(con: duckdb.DuckDBPyConnection, fmt: str, out: str | Path,
                   flt: ExportFilter | None = None) -> ExportResult:
    """Write canonical rows to `out`. Parquet to a directory (or a path without .parquet) is partitioned
    Hive-style as date=YYYY-MM-DD/pool=P/; that directory must be new or empty."""
    if fmt not in FORMATS:
        raise StoreError(f"unknown export format '{fmt}'; known: {', '.join(FORMATS)}")
    target = Path(out)
    where, params = (flt or ExportFilter()).where()
    attributes = "json(attributes) AS attributes" if fmt == "jsonl" else "attributes"
    partitioned = fmt == "parquet" and (target.is_dir() or target.suffix != ".parquet")
    if not target.parent.exists():
        raise StoreError(f"cannot write {str(target)!r}: folder {str(target.parent)!r} does not exist")
    if partitioned:
        if target.exists() and any(target.iterdir()):
            raise StoreError(f"export directory {str(target)!r} is not empty; pick a new one")
        query = (f"SELECT ts, pool, node, device, metric, value, attributes, "
                 f"strftime(make_timestamp(ts * 1000), '%Y-%m-%d') AS date FROM samples WHERE {where} "
                 f"ORDER BY ts, pool, node, device, metric, attributes")
        options = "FORMAT parquet, PARTITION_BY (date, pool), OVERWRITE_OR_IGNORE true"
    else:
        if target.is_dir():
            raise StoreError(f"{str(target)!r} is a directory; {fmt} exports go to one file")
        query = (f"SELECT ts, pool, node, device, metric, value, {attributes} FROM samples WHERE {where} "
                 f"ORDER BY ts, pool, node, device, metric, attributes")
        options = {"csv": "FORMAT csv, HEADER true", "jsonl": "FORMAT json", "parquet": "FORMAT parquet"}[fmt]
    try:
        rows = con.execute(f"COPY ({query}) TO {_literal(target)} ({options})", params).fetchall()
    except duckdb.Error as exc:
        raise StoreError(f"export to {str(target)!r} failed: {exc}") from exc
    return ExportResult(int(rows[0][0]) if rows else 0, str(target), partitioned)
