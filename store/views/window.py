"""The window every console view reads, the table that answers it exactly, and shared SQL helpers."""

from __future__ import annotations

from dataclasses import dataclass

import duckdb
import polars as pl

from canonical.timeunits import HOUR_MS, MINUTE_MS
from store.db import fetch_one

STALE_MS = 5 * MINUTE_MS  # a device with no sample in the last 5 minutes of the window stopped reporting


@dataclass(frozen=True)
class Window:
    """Half-open time range [start_ms, end_ms) and the pools in view (empty = every pool)."""

    start_ms: int
    end_ms: int
    pools: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.end_ms <= self.start_ms:
            raise ValueError(f"window end {self.end_ms} must be after its start {self.start_ms}")

    @property
    def hours(self) -> float:
        """Length of the window in hours."""
        return (self.end_ms - self.start_ms) / HOUR_MS


def table_for(w: Window, step_ms: int | None = None) -> tuple[str, int]:
    """The coarsest rollup whose buckets tile the window (and the step) exactly: (table, bucket width).

    Aggregates over whole buckets equal the raw aggregation, so a window aligned to hours reads the
    1-hour rollup, one aligned to minutes the 1-minute rollup, anything else raw samples (width 0).
    """
    step = step_ms or HOUR_MS
    if w.start_ms % HOUR_MS == 0 and w.end_ms % HOUR_MS == 0 and step % HOUR_MS == 0:
        return "rollup_1h", HOUR_MS
    if w.start_ms % MINUTE_MS == 0 and w.end_ms % MINUTE_MS == 0 and step % MINUTE_MS == 0:
        return "rollup_1m", MINUTE_MS
    return "samples", 0


def whole_hours(w: Window) -> bool:
    """True when the window starts and ends on the hour, so the hourly rollups answer it exactly."""
    return w.start_ms % HOUR_MS == 0 and w.end_ms % HOUR_MS == 0


def rollup_source(table: str) -> str:
    """A FROM clause with rollup columns, raw samples seen as one-sample buckets when table is 'samples'."""
    if table == "samples":
        return ("(SELECT ts AS bucket, pool, node, device, metric, attributes, device_wide, 1 AS count, "
                "value AS sum, value AS min, value AS max, value AS last, ts AS last_ts FROM samples)")
    return table


def pool_filter(w: Window, column: str = "pool") -> tuple[str, list[object]]:
    """An `AND pool IN (?, ...)` clause and its parameters; empty when every pool is in view."""
    if not w.pools:
        return "", []
    return f" AND {column} IN ({', '.join('?' * len(w.pools))})", list(w.pools)


def in_list(values: tuple[str, ...] | list[str]) -> str:
    """Placeholders for an IN list of the given length."""
    return ", ".join("?" * len(values))


def data_span(con: duckdb.DuckDBPyConnection) -> tuple[int, int] | None:
    """(first, last) sample time in the store, read from the hourly rollup; None when it holds nothing."""
    row = fetch_one(con, "SELECT min(bucket), max(last_ts) FROM rollup_1h")
    if not row or row[0] is None:
        return None
    return int(row[0]), int(row[1])


def effective_end(con: duckdb.DuckDBPyConnection, w: Window) -> int:
    """The window end, or the newest sample + 1 ms when the data stops earlier."""
    span = data_span(con)
    return min(w.end_ms, span[1] + 1) if span else w.end_ms


def frame(con: duckdb.DuckDBPyConnection, sql: str, params: list[object]) -> pl.DataFrame:
    """Run a SELECT into Polars on its own cursor."""
    cur = con.cursor()
    try:
        return cur.sql(sql, params=params).pl()
    finally:
        cur.close()
