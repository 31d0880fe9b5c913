"""Canonical rows of a window, pools and metrics, as CSV or Parquet bytes for the console's download."""

from __future__ import annotations

import io

import duckdb
import polars as pl

from store.errors import StoreError
from store.ingest import SAMPLE_COLUMNS
from store.views.window import Window, frame, in_list, pool_filter

FORMATS = ("csv", "parquet")


def _where(w: Window, metrics: list[str]) -> tuple[str, list[object]]:
    pools, params = pool_filter(w)
    clause = f"ts >= ? AND ts < ?{pools}"
    if metrics:
        clause += f" AND metric IN ({in_list(metrics)})"
    return clause, [w.start_ms, w.end_ms, *params, *metrics]


def metrics_in(con: duckdb.DuckDBPyConnection, w: Window) -> list[str]:
    """Canonical metrics with rollup rows in the window, for the export picker (cheap: reads the hourly rollup)."""
    pools, params = pool_filter(w)
    got = frame(con, f"SELECT DISTINCT metric FROM rollup_1h WHERE bucket >= ? AND bucket < ?{pools} ORDER BY metric",
                [w.start_ms - w.start_ms % 3_600_000, w.end_ms, *params])
    return got["metric"].to_list()


def count_rows(con: duckdb.DuckDBPyConnection, w: Window, metrics: list[str]) -> int:
    """How many raw canonical rows the selection holds."""
    clause, params = _where(w, metrics)
    got = frame(con, f"SELECT count(*) AS n FROM samples WHERE {clause}", params)
    return int(got["n"][0])


def export_frame(con: duckdb.DuckDBPyConnection, w: Window, metrics: list[str], limit: int | None = None
                 ) -> pl.DataFrame:
    """The selected canonical rows in the feed's column order, sorted as `hetpool export` sorts them."""
    clause, params = _where(w, metrics)
    cols = ", ".join(SAMPLE_COLUMNS)
    tail = " LIMIT ?" if limit is not None else ""
    return frame(con, f"SELECT {cols} FROM samples WHERE {clause} ORDER BY ts, pool, node, device, metric, "
                      f"attributes{tail}", [*params, *([limit] if limit is not None else [])])


def export_bytes(con: duckdb.DuckDBPyConnection, w: Window, metrics: list[str], fmt: str) -> bytes:
    """The selection written as CSV (with a header) or Parquet."""
    if fmt not in FORMATS:
        raise StoreError(f"unknown export format {fmt!r}; known: {', '.join(FORMATS)}")
    df = export_frame(con, w, metrics)
    buf = io.BytesIO()
    if fmt == "csv":
        df.write_csv(buf)
    else:
        df.write_parquet(buf)
    return buf.getvalue()
