"""The window every console view reads, the table that answers it exactly, and shared SQL helpers."""

from __future__ import annotations

from dataclasses import dataclass

import duckdb
import numpy as np
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


def le_value(le: str) -> float:
    """A histogram bound as written in an `le` label ('+Inf' included)."""
    return float("inf") if le.strip() in ("+Inf", "Inf", "inf") else float(le)


def histogram_quantile(bounds: list[float], cumulative: list[float], q: float) -> float | None:
    """Prometheus histogram_quantile over cumulative bucket counts sorted by bound (the last is +Inf).

    Linear interpolation inside the bucket that holds rank q * total; the first bucket starts at 0;
    a rank that lands in the +Inf bucket returns the largest finite bound. None when nothing was counted.
    """
    if not bounds or not cumulative or cumulative[-1] <= 0:
        return None
    b = np.asarray(bounds, dtype=float)
    c = np.maximum.accumulate(np.asarray(cumulative, dtype=float))  # guard against non-monotone input
    rank = q * c[-1]
    i = int(np.searchsorted(c, rank, side="left"))
    i = min(i, len(b) - 1)
    if np.isinf(b[i]):
        finite = b[np.isfinite(b)]
        return float(finite[-1]) if finite.size else None
    lo_b = b[i - 1] if i > 0 else 0.0
    lo_c = c[i - 1] if i > 0 else 0.0
    if c[i] == lo_c:
        return float(b[i])
    return float(lo_b + (b[i] - lo_b) * (rank - lo_c) / (c[i] - lo_c))


def counter_increments(con: duckdb.DuckDBPyConnection, w: Window, metric: str, step_ms: int | None = None,
                       extra: str = "") -> pl.DataFrame:
    """Increase of every series of a counter inside the window, per pool, attributes and step bucket.

    Prometheus `increase` semantics over bucket-end values, as store.quantiles computes them from raw
    samples: each bucket adds its last value minus the previous bucket's, the series' last value before the
    window being the baseline; a bucket whose minimum is below that is a reset and adds its last value (a
    rise before the reset inside the same bucket is the one thing a rollup cannot see); a series first seen
    inside the window counts from zero. Columns: pool, attributes, t (step bucket start, or the window
    start), inc.

    The baseline is read from the hourly rollup up to the hour that holds the window start, and from the
    window's own table in that hour: the same last value, without reading the whole history minute by minute.
    """
    table, _ = table_for(w, step_ms)
    src = rollup_source(table)
    pools, pool_params = pool_filter(w)
    step = f"bucket - bucket % {int(step_ms)}" if step_ms else str(int(w.start_ms))
    hour = w.start_ms - w.start_ms % HOUR_MS
    sql = f"""
        WITH s AS (
            SELECT pool, node, device, attributes, bucket, min, last FROM {src}
            WHERE metric = ? AND bucket >= ? AND bucket < ?{pools}{extra}
            UNION ALL
            SELECT pool, node, device, attributes, ? - 1 AS bucket, NULL, arg_max(last, last_ts) AS last FROM (
                SELECT pool, node, device, attributes, last, last_ts FROM rollup_1h
                WHERE metric = ? AND bucket < ?{pools}{extra}
                UNION ALL
                SELECT pool, node, device, attributes, last, last_ts FROM {src}
                WHERE metric = ? AND bucket >= ? AND bucket < ?{pools}{extra})
            GROUP BY pool, node, device, attributes
        ), k AS (  -- a number per series: the window sorts integers, not four strings, JSON among them
            SELECT pool, node, device, attributes, row_number() OVER () AS series
            FROM (SELECT DISTINCT pool, node, device, attributes FROM s)
        ), d AS (
            SELECT pool, attributes, bucket, min, last, lag(last) OVER (PARTITION BY series ORDER BY bucket) AS prev
            FROM s JOIN k USING (pool, node, device, attributes)
        )
        SELECT pool, attributes, {step} AS t,
               sum(CASE WHEN prev IS NULL OR min < prev THEN last ELSE last - prev END) AS inc
        FROM d WHERE bucket >= ? GROUP BY ALL ORDER BY pool, t, attributes"""
    return frame(con, sql, [metric, w.start_ms, w.end_ms, *pool_params, w.start_ms, metric, hour, *pool_params,
                            metric, hour, w.start_ms, *pool_params, w.start_ms])


def histogram_quantiles(con: duckdb.DuckDBPyConnection, w: Window, metric: str, q: float,
                        step_ms: int | None = None) -> pl.DataFrame:
    """Quantile q of a canonical histogram per pool (and step bucket) from its `le` bucket counters.

    Columns: pool, t, value (None when the window holds no observation).
    """
    inc = counter_increments(con, w, metric, step_ms,
                             extra=" AND json_extract_string(attributes, '$.le') IS NOT NULL")
    if inc.is_empty():
        return pl.DataFrame(schema={"pool": pl.String, "t": pl.Int64, "value": pl.Float64})
    les = inc.with_columns(pl.col("attributes").str.json_path_match("$.le").alias("le"))
    bounds = {le: le_value(le) for le in les["le"].unique().to_list()}
    per_le = (les.with_columns(pl.col("le").replace_strict(bounds, return_dtype=pl.Float64).alias("bound"))
              .group_by("pool", "t", "bound").agg(pl.col("inc").sum()))
    rows = []
    for (pool, t), g in per_le.sort("bound").group_by(["pool", "t"], maintain_order=True):
        rows.append({"pool": pool, "t": t,
                     "value": histogram_quantile(g["bound"].to_list(), g["inc"].to_list(), q)})
    return pl.DataFrame(rows, schema={"pool": pl.String, "t": pl.Int64, "value": pl.Float64}).sort("pool", "t")
