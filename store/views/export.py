"""Canonical rows of a window, pools and metrics, as CSV or Parquet bytes for the console's download."""

from __future__ import annotations

import io

import duckdb
import polars as pl

from canonical.timeunits import HOUR_MS
from store.exceptions import StoreError
from store.exports import ExportFilter, export_count, export_frame
from store.views.window import Window, frame, pool_filter

FORMATS = ("csv", "parquet")


def _filter(w: Window, metrics: list[str], resolution: str) -> ExportFilter:
    return ExportFilter(w.start_ms, w.end_ms, w.pools, tuple(metrics), resolution)


def metrics_in(con: duckdb.DuckDBPyConnection, w: Window) -> list[str]:
    """Canonical metrics with rollup rows in the window, for the export picker (cheap: reads the hourly rollup)."""
    pools, params = pool_filter(w)
    got = frame(con, f"SELECT DISTINCT metric FROM rollup_1h WHERE bucket >= ? AND bucket < ?{pools} ORDER BY metric",
                [w.start_ms - w.start_ms % HOUR_MS, w.end_ms, *params])
    return got["metric"].to_list()


def count_rows(con: duckdb.DuckDBPyConnection, w: Window, metrics: list[str], resolution: str = "auto"
               ) -> tuple[int, str]:
    """How many rows an export of the selection holds, and the resolution it reads."""
    return export_count(con, _filter(w, metrics, resolution))


def export_bytes(con: duckdb.DuckDBPyConnection, w: Window, metrics: list[str], fmt: str,
                 resolution: str = "auto") -> bytes:
    """The selection written as CSV (with a header) or Parquet, exactly as `hetpool export` selects it."""
    if fmt not in FORMATS:
        raise StoreError(f"unknown export format {fmt!r}; known: {', '.join(FORMATS)}")
    df = export_frame(con, _filter(w, metrics, resolution), for_spreadsheet=fmt == "csv")
    buf = io.BytesIO()
    if fmt == "csv":
        df.write_csv(buf)
    else:
        df.write_parquet(buf)
    return buf.getvalue()


def preview(con: duckdb.DuckDBPyConnection, w: Window, metrics: list[str], resolution: str = "auto",
            limit: int = 20) -> pl.DataFrame:
    """The first rows of the export."""
    return export_frame(con, _filter(w, metrics, resolution), limit=limit)
