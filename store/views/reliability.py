"""Errors and reliability: error classes over time, the event table, the reliability index, nodes to drain.

Reliability index of a pool over a window, computed on whole hours from the 1-hour rollup:

    R = healthy device-hours / observed device-hours

- observed device-hours = (devices of the pool: those the registry declares, or those that reported in the
  window when more did) x (hours in which the pool reported at all), so a device that vanishes, or never
  reported at all (silent), keeps counting against the pool while a pool that has not started reporting yet
  (onboarding) is not charged for hours before its first sample;
- a device-hour is healthy when the device reported utilization in that hour, its health never read 0,
  and no fatal error event was recorded on it (or on its node as a whole) in that hour.

A node is to be drained when, in the window, it recorded a fatal error event, one of its devices last read
health 0, or one of its devices stopped reporting.
"""

from __future__ import annotations

from collections.abc import Mapping

import duckdb
import polars as pl

from canonical.metrics import ERRORS, HEALTH
from canonical.timeunits import HOUR_MS
from store.views.health import UTIL
from store.views.window import STALE_MS, Window, effective_end, frame, pool_filter, rollup_source, table_for

EVENT_LIMIT = 500


def error_timeline(con: duckdb.DuckDBPyConnection, w: Window, step_ms: int) -> pl.DataFrame:
    """Error events per step bucket: t, pool, error_class, severity, events."""
    table, _ = table_for(w, step_ms)
    pools, params = pool_filter(w)
    return frame(con, f"""
        SELECT bucket - bucket % {int(step_ms)} AS t, pool,
            coalesce(json_extract_string(attributes, '$.error_class'), 'unknown') AS error_class,
            coalesce(json_extract_string(attributes, '$.severity'), 'unknown') AS severity,
            sum(sum) AS events
        FROM {rollup_source(table)} WHERE metric = ? AND bucket >= ? AND bucket < ?{pools}
        GROUP BY ALL ORDER BY t, pool, error_class""", [ERRORS, w.start_ms, w.end_ms, *params])


def events_since(con: duckdb.DuckDBPyConnection, w: Window, limit: int = EVENT_LIMIT) -> int:
    """The start of the newest whole hours of the window that hold at least `limit` error events, else its start.

    The hourly rollup counts the raw rows of every hour, so the newest `limit` rows of the window are at or after
    that time, and the event table reads raw samples from there rather than the whole window: a raw scan of one
    rare metric costs the window's samples of every metric. Only hours wholly inside the window count (a partial
    one may hold rows outside it); raw samples pruned from an hour are older than every one kept, so the
    newest `limit` kept rows are still at or after it.
    """
    pools, params = pool_filter(w)
    counts = frame(con, f"""
        SELECT bucket, sum(count) AS n FROM rollup_1h
        WHERE metric = ? AND bucket >= ? AND bucket + {HOUR_MS} <= ?{pools}
        GROUP BY bucket ORDER BY bucket DESC""", [ERRORS, w.start_ms, w.end_ms, *params])
    held = 0
    for bucket, n in counts.iter_rows():
        held += int(n)
        if held >= limit:
            return max(int(bucket), w.start_ms)
    return w.start_ms


def error_events(con: duckdb.DuckDBPyConnection, w: Window, limit: int = EVENT_LIMIT) -> pl.DataFrame:
    """The newest error events of the window, one row each: ts, pool, node, device, code, class, severity, count."""
    pools, params = pool_filter(w)
    since = events_since(con, w, limit)
    return frame(con, f"""
        SELECT ts, pool, node, device,
            coalesce(json_extract_string(attributes, '$.code'), '') AS code,
            coalesce(json_extract_string(attributes, '$.error_class'), 'unknown') AS error_class,
            coalesce(json_extract_string(attributes, '$.severity'), 'unknown') AS severity,
            value AS count
        FROM samples WHERE metric = ? AND ts >= ? AND ts < ?{pools}
        ORDER BY ts DESC, pool, node, device LIMIT ?""", [ERRORS, since, w.end_ms, *params, limit])


def hour_window(w: Window) -> Window:
    """The window widened to whole hours (the reliability index counts device-hours)."""
    start = w.start_ms - w.start_ms % HOUR_MS
    end = w.end_ms if w.end_ms % HOUR_MS == 0 else w.end_ms - w.end_ms % HOUR_MS + HOUR_MS
    return Window(start, end, w.pools)


def reliability(con: duckdb.DuckDBPyConnection, w: Window, declared: Mapping[str, int] | None = None
                ) -> pl.DataFrame:
    """Per pool that reported in the window: devices counted (the declared ones, or those that reported when more
    did), those that reported and those silent, hours, observed and healthy device-hours, the index R (see the
    module doc), and `reported_hours`, the device-hours of the devices that reported."""
    counted = pl.col("reporting").clip(lower_bound=pl.col("pool").replace_strict(
        dict(declared or {}), default=0, return_dtype=pl.Int64))
    return _reported(con, w).with_columns(counted.alias("devices")).select(
        "pool", "devices", "reporting", (pl.col("devices") - pl.col("reporting")).alias("silent"), "hours",
        (pl.col("devices") * pl.col("hours")).alias("observed"), "healthy",
        (pl.col("healthy") / (pl.col("devices") * pl.col("hours"))).alias("index"),
        (pl.col("reporting") * pl.col("hours")).alias("reported_hours"))


def _reported(con: duckdb.DuckDBPyConnection, w: Window) -> pl.DataFrame:
    """Per pool: the devices that reported, the hours it reported and the healthy device-hours."""
    h = hour_window(w)
    pools, params = pool_filter(h)
    return frame(con, f"""
        WITH r AS (
            SELECT bucket, pool, node, device, metric, attributes, min, sum FROM rollup_1h
            WHERE bucket >= ? AND bucket < ? AND metric IN (?, ?, ?){pools}
        ), reported AS (
            SELECT DISTINCT pool, node, device, bucket FROM r WHERE metric = ? AND device <> ''
        ), unhealthy AS (
            SELECT DISTINCT pool, node, device, bucket FROM r WHERE metric = ? AND min < 1
        ), fatal AS (
            SELECT DISTINCT pool, node, device, bucket FROM r
            WHERE metric = ? AND json_extract_string(attributes, '$.severity') = 'fatal' AND sum > 0
        ), good AS (
            SELECT pool, count(*) AS healthy FROM reported x
            WHERE NOT EXISTS (SELECT 1 FROM unhealthy u WHERE u.pool = x.pool AND u.node = x.node
                              AND u.device = x.device AND u.bucket = x.bucket)
              AND NOT EXISTS (SELECT 1 FROM fatal f WHERE f.pool = x.pool AND f.node = x.node
                              AND (f.device = x.device OR f.device = '') AND f.bucket = x.bucket)
            GROUP BY pool
        ), shape AS (
            SELECT pool, count(DISTINCT (node, device)) AS devices, count(DISTINCT bucket) AS hours
            FROM reported GROUP BY pool
        )
        SELECT shape.pool, devices AS reporting, hours, coalesce(healthy, 0) AS healthy
        FROM shape LEFT JOIN good USING (pool) ORDER BY shape.pool""",
        [h.start_ms, h.end_ms, UTIL, HEALTH, ERRORS, *params, UTIL, HEALTH, ERRORS])


def nodes_to_drain(con: duckdb.DuckDBPyConnection, w: Window) -> pl.DataFrame:
    """Nodes with a fatal error, a device whose last health reading is 0, or a silent device: pool, node, reasons."""
    table, _ = table_for(w)
    pools, params = pool_filter(w)
    end = effective_end(con, w)
    rows = frame(con, f"""
        WITH r AS (
            SELECT pool, node, device, metric, attributes, sum, last, last_ts FROM {rollup_source(table)}
            WHERE bucket >= ? AND bucket < ?{pools}
        ), fatal AS (
            SELECT pool, node, sum(sum) AS fatal_events,
                string_agg(DISTINCT json_extract_string(attributes, '$.code'), ', ') AS codes
            FROM r WHERE metric = ? AND json_extract_string(attributes, '$.severity') = 'fatal' AND sum > 0
            GROUP BY pool, node
        ), health AS (
            SELECT pool, node, device, arg_max(last, last_ts) AS last_health FROM r WHERE metric = ?
            GROUP BY pool, node, device
        ), sick AS (
            SELECT pool, node, count(*) AS unhealthy FROM health WHERE last_health < 1 GROUP BY pool, node
        ), silent AS (
            SELECT pool, node, count(*) AS silent FROM (
                SELECT pool, node, device, max(last_ts) AS seen FROM r
                WHERE device <> '' AND metric LIKE 'accelerator.%' GROUP BY pool, node, device)
            WHERE seen < ? GROUP BY pool, node
        )
        SELECT pool, node, coalesce(fatal_events, 0) AS fatal_events, coalesce(codes, '') AS codes,
            coalesce(unhealthy, 0) AS unhealthy_devices, coalesce(silent, 0) AS silent_devices
        FROM fatal FULL JOIN sick USING (pool, node) FULL JOIN silent USING (pool, node)
        ORDER BY fatal_events DESC, unhealthy_devices DESC, silent_devices DESC, pool, node""",
        [w.start_ms, w.end_ms, *params, ERRORS, HEALTH, end - STALE_MS])
    reasons = pl.concat_list(
        pl.when(pl.col("fatal_events") > 0).then(
            pl.format("{} fatal error {} (codes {})", pl.col("fatal_events").cast(pl.Int64),
                      pl.when(pl.col("fatal_events") == 1).then(pl.lit("event")).otherwise(pl.lit("events")),
                      "codes")),
        pl.when(pl.col("unhealthy_devices") > 0).then(
            pl.format("{} device(s) last read unhealthy", "unhealthy_devices")),
        pl.when(pl.col("silent_devices") > 0).then(pl.format("{} device(s) stopped reporting", "silent_devices")),
    ).list.drop_nulls().list.join("; ")
    return rows.with_columns(reasons.alias("reasons"))
