"""What the status rules judge, read from the store: each device's state in a window, and collector freshness.

- temp_max: the device's hottest device-wide temperature sample in the window;
- last_health: its last health reading (1 healthy, 0 not);
- fatal_errors / fatal_codes: fatal error events recorded on it, and their vendor codes (a row with device ''
  holds the events recorded on the node as a whole);
- hbm_used: memory used over memory total at its last reading;
- last_ts: its newest accelerator sample; silent_ms: how long before the window's end (or the newest sample,
  when the data stops earlier) that was; stopped: silent for more than STALE_MS;
- busy, throttled_minutes, throttled: see health.device_throttling.
"""

from __future__ import annotations

import duckdb
import polars as pl

from canonical.metrics import ERRORS, HEALTH
from store.views.health import MEM_TOTAL, MEM_USED, TEMP, device_throttling
from store.views.window import (
    STALE_MS,
    Window,
    effective_end,
    frame,
    pool_filter,
    rollup_source,
    table_for,
    whole_hours,
)

RECURRING = ("prometheus", "scrape")  # ingest kinds that run on a schedule, so their silence means lag

FACTS_SCHEMA = {
    "pool": pl.String, "node": pl.String, "device": pl.String, "temp_max": pl.Float64, "last_health": pl.Float64,
    "fatal_errors": pl.Float64, "fatal_codes": pl.String, "hbm_used": pl.Float64, "last_ts": pl.Int64,
    "silent_ms": pl.Int64, "stopped": pl.Boolean, "busy": pl.Int64, "throttled_minutes": pl.Int64,
    "throttled": pl.Boolean,
}


def device_facts(con: duckdb.DuckDBPyConnection, w: Window) -> pl.DataFrame:
    """One row per device (and per node for node-wide error events) with the columns of FACTS_SCHEMA."""
    table, _ = table_for(w)
    pools, params = pool_filter(w)
    fatal = "metric = ? AND json_extract_string(attributes, '$.severity') = 'fatal' AND sum > 0"
    state = _facts_from_hours(con, w) if whole_hours(w) else frame(con, f"""
        WITH r AS (
            SELECT pool, node, device, metric, attributes, device_wide, sum, max, last, last_ts
            FROM {rollup_source(table)}
            WHERE bucket >= ? AND bucket < ? AND metric LIKE 'accelerator.%'{pools}
        )
        SELECT pool, node, device,
            max(max) FILTER (WHERE metric = ? AND device_wide) AS temp_max,
            arg_max(last, last_ts) FILTER (WHERE metric = ? AND device_wide) AS last_health,
            coalesce(sum(sum) FILTER (WHERE {fatal}), 0) AS fatal_errors,
            coalesce(string_agg(DISTINCT json_extract_string(attributes, '$.code'), ', ') FILTER (WHERE {fatal}), '')
                AS fatal_codes,
            arg_max(last, last_ts) FILTER (WHERE metric = ? AND device_wide)
                / nullif(arg_max(last, last_ts) FILTER (WHERE metric = ? AND device_wide), 0) AS hbm_used,
            max(last_ts) FILTER (WHERE metric <> ?) AS last_ts
        FROM r GROUP BY pool, node, device
        HAVING device <> '' OR fatal_errors > 0""",
        [w.start_ms, w.end_ms, *params, TEMP, HEALTH, ERRORS, ERRORS, MEM_USED, MEM_TOTAL, ERRORS])
    throttling = device_throttling(con, w)
    end = effective_end(con, w)
    out = state.join(throttling, on=["pool", "node", "device"], how="left").with_columns(
        (end - pl.col("last_ts")).alias("silent_ms"), (pl.col("last_ts") < end - STALE_MS).alias("stopped"))
    return out.select([pl.col(c).cast(t) for c, t in FACTS_SCHEMA.items()]).sort("pool", "node", "device")


def _facts_from_hours(con: duckdb.DuckDBPyConnection, w: Window) -> pl.DataFrame:
    """device_facts' state columns of a window of whole hours: device_hours, and the fatal events of rollup_1h."""
    pools, params = pool_filter(w)
    return frame(con, f"""
        WITH d AS (
            SELECT pool, node, device, max(temp_max) AS temp_max, arg_max(health_last, health_ts) AS last_health,
                arg_max(used_last, used_ts) / nullif(arg_max(total_last, total_ts), 0) AS hbm_used,
                max(last_ts) AS last_ts
            FROM device_hours WHERE bucket >= ? AND bucket < ?{pools} GROUP BY pool, node, device
        ), f AS (
            SELECT pool, node, device, sum(sum) AS fatal_errors,
                string_agg(DISTINCT json_extract_string(attributes, '$.code'), ', ') AS fatal_codes
            FROM rollup_1h
            WHERE bucket >= ? AND bucket < ? AND metric = ? AND sum > 0
                AND json_extract_string(attributes, '$.severity') = 'fatal'{pools}
            GROUP BY pool, node, device
        )
        SELECT pool, node, device, temp_max, last_health, coalesce(fatal_errors, 0) AS fatal_errors,
            coalesce(fatal_codes, '') AS fatal_codes, hbm_used, last_ts
        FROM d LEFT JOIN f USING (pool, node, device)
        WHERE device <> '' OR coalesce(fatal_errors, 0) > 0""",
        [w.start_ms, w.end_ms, *params, w.start_ms, w.end_ms, ERRORS, *params])


LAG_SCHEMA = {"kind": pl.String, "source": pl.String, "newest_sample_ms": pl.Int64, "last_status": pl.String}


def collector_freshness(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """Per recurring collector: the newest sample it stored and its last run's status."""
    got = frame(con, f"""
        SELECT kind, source, max(window_end) AS newest_sample_ms, arg_max(status, run_id) AS last_status
        FROM ingest_runs WHERE kind IN ({", ".join("?" * len(RECURRING))})
        GROUP BY kind, source ORDER BY kind, source""", list(RECURRING))
    return got.select([pl.col(c).cast(t) for c, t in LAG_SCHEMA.items()])
