"""Fleet health: per-pool tiles, per-pool time series and the worst devices, read from the rollups.

Definitions an operator can check by hand:
- reporting: a device with at least one accelerator sample in the last 5 minutes before the window end
  (or before the newest sample, when the data stops earlier);
- utilization: mean of every utilization sample of the pool in the window;
- HBM used: sum of used bytes over sum of total bytes, over the pool's samples in the window;
- power: sum over the pool's devices of each device's mean draw in the window;
- max temperature: the highest temperature sample in the window;
- throttled share: the share of the pool's devices (those with clock or utilization samples in the window)
  that were throttled: at least 10 % of their busy device-minutes (mean utilization >= 50 %) ran with a mean
  clock more than 10 % below the pool's reference clock, the highest device-minute clock in the window, so one
  power-capped device of eight reads 12.5 % however idle the others are;
- fatal errors: error events of severity fatal in the window;
- p99 TTFT: 99th percentile of time to first token from the serving histogram buckets in the window;
- straggler: a device whose mean clock in the window is more than 15 % below its pool's median device;
- hot: a device whose temperature reached its pool's warning limit (the caller's, from the status rules and the
  chips' own limits);
- stopped reporting: a device with samples in the window but none in its last 5 minutes.
"""

from __future__ import annotations

from collections.abc import Mapping

import duckdb
import polars as pl

from canonical.metrics import (
    CLOCK,
    ERRORS,
    MEMORY_TOTAL,
    MEMORY_USED,
    METRICS,
    POWER,
    TEMPERATURE,
    TTFT,
    UTILIZATION,
)
from canonical.timeunits import MINUTE_MS
from store.fleetrollups import BUSY_UTIL, NODE_METRICS
from store.rollups import floor_to
from store.views.counters import histogram_quantiles
from store.views.window import (
    STALE_MS,
    Window,
    effective_end,
    frame,
    in_list,
    pool_filter,
    rollup_source,
    table_for,
    whole_hours,
)

UTIL, MEM_USED, MEM_TOTAL, TEMP = UTILIZATION, MEMORY_USED, MEMORY_TOTAL, TEMPERATURE
THROTTLE_RATIO = 0.9     # busy and below this share of the reference clock = throttled
THROTTLED_DEVICE = 0.1   # a device with at least this share of its busy minutes throttled is throttled
STRAGGLER_RATIO = 0.85   # mean clock below this share of the pool median = straggler

def primary(metrics: list[str]) -> tuple[str, list[object]]:
    """A clause keeping, of each per-device metric, the series that describe the device as a whole (the
    profiles mark the others `scope: component`), and its parameters."""
    # one IN list per kind, not an OR per metric: DuckDB pushes an IN list into the scan, an OR it does not
    wide = [m for m in metrics if METRICS[m].per_device]
    other = [m for m in metrics if not METRICS[m].per_device]
    parts = [*([f"(metric IN ({in_list(wide)}) AND device_wide)"] if wide else []),
             *([f"metric IN ({in_list(other)})"] if other else [])]
    return "(" + " OR ".join(parts) + ")", [*wide, *other]


TILE_SCHEMA = {
    "pool": pl.String, "reporting": pl.Int64, "utilization": pl.Float64, "hbm_used": pl.Float64,
    "power_w": pl.Float64, "temp_max": pl.Float64, "throttled": pl.Float64, "fatal_errors": pl.Float64,
    "ttft_p99": pl.Float64,
}


def reporting_devices(con: duckdb.DuckDBPyConnection, w: Window) -> pl.DataFrame:
    """Devices per pool with a sample in the last STALE_MS of the window: pool, reporting."""
    end = effective_end(con, w)
    since = max(floor_to(end - STALE_MS, MINUTE_MS), w.start_ms)
    pools, params = pool_filter(w)
    return frame(con, f"""
        SELECT pool, count(DISTINCT (node, device)) AS reporting FROM rollup_1m
        WHERE bucket >= ? AND bucket < ? AND device <> '' AND metric LIKE 'accelerator.%'{pools}
        GROUP BY pool ORDER BY pool""", [since, end, *params])


def gauge_tiles(con: duckdb.DuckDBPyConnection, w: Window) -> pl.DataFrame:
    """utilization, hbm_used, power_w, temp_max and fatal_errors per pool over the window."""
    if whole_hours(w):
        return _gauge_tiles_from_hours(con, w)
    table, _ = table_for(w)
    src = rollup_source(table)
    pools, params = pool_filter(w)
    which, metrics = primary([UTIL, MEM_USED, MEM_TOTAL, POWER, TEMP, ERRORS])
    return frame(con, f"""
        WITH r AS (
            SELECT pool, node, device, metric, attributes, count, sum, max FROM {src}
            WHERE bucket >= ? AND bucket < ? AND {which}{pools}
        ), power AS (
            SELECT pool, sum(p) AS power_w FROM (
                SELECT pool, sum(sum) / sum(count) AS p FROM r WHERE metric = ? GROUP BY pool, node, device)
            GROUP BY pool
        ), agg AS (
            SELECT pool,
                sum(sum) FILTER (WHERE metric = ?) / sum(count) FILTER (WHERE metric = ?) AS utilization,
                sum(sum) FILTER (WHERE metric = ?) / nullif(sum(sum) FILTER (WHERE metric = ?), 0) AS hbm_used,
                max(max) FILTER (WHERE metric = ?) AS temp_max,
                coalesce(sum(sum) FILTER (WHERE metric = ?
                    AND json_extract_string(attributes, '$.severity') = 'fatal'), 0) AS fatal_errors
            FROM r GROUP BY pool
        )
        SELECT agg.pool, utilization, hbm_used, power_w, temp_max, fatal_errors
        FROM agg LEFT JOIN power USING (pool) ORDER BY agg.pool""",
        [w.start_ms, w.end_ms, *metrics, *params, POWER, UTIL, UTIL, MEM_USED, MEM_TOTAL, TEMP, ERRORS])


def _gauge_tiles_from_hours(con: duckdb.DuckDBPyConnection, w: Window) -> pl.DataFrame:
    """gauge_tiles of a window of whole hours: the gauges from device_hours, the errors from rollup_1h."""
    pools, params = pool_filter(w)
    return frame(con, f"""
        WITH d AS (
            SELECT pool, sum(util_sum) AS util_sum, sum(util_count) AS util_count, sum(used_sum) AS used_sum,
                sum(total_sum) AS total_sum, max(temp_max) AS temp_max, sum(power_sum) / sum(power_count) AS p
            FROM device_hours WHERE bucket >= ? AND bucket < ?{pools} GROUP BY pool, node, device
        ), e AS (
            SELECT pool, sum(sum) AS fatal_errors FROM rollup_1h
            WHERE bucket >= ? AND bucket < ? AND metric = ? AND device_wide
                AND json_extract_string(attributes, '$.severity') = 'fatal'{pools}
            GROUP BY pool
        ), agg AS (
            SELECT pool, sum(util_sum) / sum(util_count) AS utilization,
                sum(used_sum) / nullif(sum(total_sum), 0) AS hbm_used, sum(p) AS power_w, max(temp_max) AS temp_max
            FROM d GROUP BY pool
        )
        SELECT pool, utilization, hbm_used, power_w, temp_max, coalesce(e.fatal_errors, 0) AS fatal_errors
        FROM agg LEFT JOIN e USING (pool) ORDER BY pool""",
        [w.start_ms, w.end_ms, *params, w.start_ms, w.end_ms, ERRORS, *params])


def _device_minutes(w: Window) -> tuple[str, list[object]]:
    """Per device-minute mean clock and utilization (the throttling view), as SQL and parameters."""
    pools, params = pool_filter(w)
    if table_for(w, MINUTE_MS)[0] != "samples":
        return (f"SELECT pool, node, device, bucket AS minute, clock, util FROM device_minutes "
                f"WHERE bucket >= ? AND bucket < ?{pools}", [w.start_ms, w.end_ms, *params])
    which, metrics = primary([CLOCK, UTIL])
    sql = f"""
        SELECT pool, node, device, bucket - bucket % {MINUTE_MS} AS minute,
            sum(sum) FILTER (WHERE metric = ?) / sum(count) FILTER (WHERE metric = ?) AS clock,
            sum(sum) FILTER (WHERE metric = ?) / sum(count) FILTER (WHERE metric = ?) AS util
        FROM {rollup_source("samples")}
        WHERE bucket >= ? AND bucket < ? AND {which} AND device <> ''{pools}
        GROUP BY ALL"""
    return sql, [CLOCK, CLOCK, UTIL, UTIL, w.start_ms, w.end_ms, *metrics, *params]


def _device_summary(w: Window) -> tuple[str, list[object]]:
    """Per device: busy device-minutes and highest device-minute clock in the window, as SQL and parameters.

    A window of whole hours reads device_hours, so only the throttled candidates' minutes are read."""
    pools, params = pool_filter(w)
    if whole_hours(w):
        return (f"SELECT pool, node, device, sum(busy)::BIGINT AS busy, max(max_clock) AS max_clock FROM device_hours "
                f"WHERE bucket >= ? AND bucket < ? AND device <> ''{pools} GROUP BY ALL HAVING sum(minutes) > 0",
                [w.start_ms, w.end_ms, *params])
    minutes, mparams = _device_minutes(w)
    return (f"SELECT pool, node, device, count(*) FILTER (WHERE util >= ?) AS busy, max(clock) AS max_clock "
            f"FROM ({minutes}) GROUP BY ALL", [BUSY_UTIL, *mparams])


def device_throttling(con: duckdb.DuckDBPyConnection, w: Window) -> pl.DataFrame:
    """Per device: busy device-minutes, throttled ones, and whether the device counts as throttled."""
    summary, sparams = _device_summary(w)
    minutes, mparams = _device_minutes(w)
    # the throttled minutes are a filter on the minutes below the highest pool's reference, joined to their
    # pool's: a healthy fleet has few, so the join sees few rows
    return frame(con, f"""
        WITH d AS ({summary}), ref AS (SELECT pool, max(max_clock) AS ref FROM d GROUP BY pool),
        t AS (
            SELECT m.pool, m.node, m.device, count(*) AS n FROM ({minutes}) m JOIN ref USING (pool)
            WHERE m.util >= ? AND m.clock < ? * (SELECT max(ref) FROM ref) AND m.clock < ? * ref.ref
            GROUP BY ALL)
        SELECT d.pool, d.node, d.device, d.busy, coalesce(t.n, 0) AS throttled_minutes,
            d.busy > 0 AND coalesce(t.n, 0) >= ? * d.busy AS throttled
        FROM d LEFT JOIN t USING (pool, node, device) ORDER BY d.pool, d.node, d.device""",
        [*sparams, *mparams, BUSY_UTIL, THROTTLE_RATIO, THROTTLE_RATIO, THROTTLED_DEVICE])


def throttled_share(con: duckdb.DuckDBPyConnection, w: Window, per_device: pl.DataFrame | None = None) -> pl.DataFrame:
    """Per pool: devices seen, throttled devices, and their share (from `per_device`, device_throttling's columns
    of this window, when the caller read them already; its rows without busy are devices that view has not)."""
    if per_device is None:
        per_device = device_throttling(con, w)
    return (per_device.filter(pl.col("busy").is_not_null()).group_by("pool").agg(pl.len().alias("devices"),
                                            pl.col("throttled").sum().cast(pl.Int64).alias("throttled"))
            .with_columns((pl.col("throttled") / pl.col("devices")).alias("share")).sort("pool"))


def pool_tiles(con: duckdb.DuckDBPyConnection, w: Window, pools: list[str],
               throttling: pl.DataFrame | None = None) -> pl.DataFrame:
    """One row per pool in `pools` order with every tile number (nulls where the pool has no data).

    `throttling` is device_throttling's rows of the same window when the caller read them already (the status
    facts do): the device-minutes are the heaviest read of the tiles, and are then not read twice.
    """
    base = pl.DataFrame({"pool": pools}, schema={"pool": pl.String})
    ttft = histogram_quantiles(con, w, TTFT, 0.99).select("pool", pl.col("value").alias("ttft_p99"))
    share = throttled_share(con, w, throttling).select("pool", pl.col("share").alias("throttled"))
    out = (base.join(reporting_devices(con, w), on="pool", how="left")
           .join(gauge_tiles(con, w), on="pool", how="left")
           .join(share, on="pool", how="left")
           .join(ttft, on="pool", how="left"))
    return out.with_columns(pl.col("reporting").fill_null(0)).select(
        [pl.col(c).cast(t) for c, t in TILE_SCHEMA.items()])


POOL_TABLE = {"rollup_1m": "pool_1m", "rollup_1h": "pool_1h"}
SERIES = {  # series name -> (numerator metric, denominator metric or None for a plain mean)
    "utilization": (UTIL, None),
    "HBM used": (MEM_USED, MEM_TOTAL),
    "power per device (W)": (POWER, None),
    "temperature (°C)": (TEMP, None),
    "clock (MHz)": (CLOCK, None),
}
assert {m for pair in SERIES.values() for m in pair if m} <= set(NODE_METRICS), "pool_1m must hold every series"


def metric_series(con: duckdb.DuckDBPyConnection, w: Window, step_ms: int) -> pl.DataFrame:
    """Pool-level series per step bucket: t, pool, series, value (see SERIES for what each one is)."""
    table, _ = table_for(w, step_ms)
    pools, params = pool_filter(w)
    needed = sorted({m for pair in SERIES.values() for m in pair if m})
    metrics: list[object] = list(needed)
    if table == "samples":
        which, metrics = primary(needed)
        source, where = rollup_source(table), f"device <> '' AND {which}"
    else:  # the pool rollups hold these sums over each pool's device-wide series: a row per pool and bucket
        source, where = POOL_TABLE[table], f"metric IN ({in_list(needed)})"
    raw = frame(con, f"""
        SELECT bucket - bucket % {int(step_ms)} AS t, pool, metric, sum(sum) AS s, sum(count) AS n
        FROM {source}
        WHERE bucket >= ? AND bucket < ? AND {where}{pools}
        GROUP BY ALL""", [w.start_ms, w.end_ms, *metrics, *params])
    parts = []
    for name, (num, den) in SERIES.items():
        a = raw.filter(pl.col("metric") == num)
        if den is None:
            value = pl.col("s") / pl.col("n")
            if num == CLOCK:
                value = value / 1e6
            parts.append(a.select("t", "pool", pl.lit(name).alias("series"), value.alias("value")))
        else:
            b = raw.filter(pl.col("metric") == den).select("t", "pool", pl.col("s").alias("d"))
            parts.append(a.join(b, on=["t", "pool"]).select(
                "t", "pool", pl.lit(name).alias("series"), (pl.col("s") / pl.col("d")).alias("value")))
    ttft = histogram_quantiles(con, w, TTFT, 0.99, step_ms).drop_nulls("value").select(
        "t", "pool", pl.lit("p99 TTFT (s)").alias("series"), "value")
    parts.append(ttft)
    return pl.concat(parts, how="vertical_relaxed").sort("series", "pool", "t")


def worst_devices(con: duckdb.DuckDBPyConnection, w: Window, hot_c: Mapping[str, float],
                  hot_default: float | None = None) -> pl.DataFrame:
    """Stragglers, hot devices and devices that stopped reporting: issue, pool, node, device, value, detail. A device
    is hot at or above its pool's `hot_c` (pool -> °C), else `hot_default` (None: not judged)."""
    table, _ = table_for(w)
    pools, params = pool_filter(w)
    end = effective_end(con, w)
    which, metrics = primary([CLOCK, TEMP])
    per_device = frame(con, f"""
        SELECT pool, node, device, sum(clock_sum) / sum(clock_count) AS clock, max(temp_max) AS temp_max,
            max(seen_ts) AS last_ts
        FROM device_hours WHERE bucket >= ? AND bucket < ? AND device <> ''{pools} GROUP BY pool, node, device""",
        [w.start_ms, w.end_ms, *params]) if whole_hours(w) else frame(con, f"""
        SELECT pool, node, device,
            sum(sum) FILTER (WHERE metric = ? AND {which}) / sum(count) FILTER (WHERE metric = ? AND {which}) AS clock,
            max(max) FILTER (WHERE metric = ? AND {which}) AS temp_max,
            max(last_ts) AS last_ts
        FROM {rollup_source(table)}
        WHERE bucket >= ? AND bucket < ? AND device <> '' AND metric LIKE 'accelerator.%'{pools}
        GROUP BY pool, node, device""",
        [CLOCK, *metrics, CLOCK, *metrics, TEMP, *metrics, w.start_ms, w.end_ms, *params])
    schema = {"issue": pl.String, "pool": pl.String, "node": pl.String, "device": pl.String,
              "value": pl.Float64, "detail": pl.String}
    if per_device.is_empty():
        return pl.DataFrame(schema=schema)
    median = per_device.group_by("pool").agg(pl.col("clock").median().alias("median_clock"))
    d = per_device.join(median, on="pool")
    stopped = d.filter(pl.col("last_ts") < end - STALE_MS).select(
        pl.lit("stopped reporting").alias("issue"), "pool", "node", "device",
        ((end - pl.col("last_ts")) / 60_000).alias("value"),
        pl.format("no sample for {} min", ((end - pl.col("last_ts")) / 60_000).round(0).cast(pl.Int64))
        .alias("detail"))
    stragglers = d.filter(pl.col("clock") < STRAGGLER_RATIO * pl.col("median_clock")).select(
        pl.lit("straggler").alias("issue"), "pool", "node", "device", (pl.col("clock") / 1e6).alias("value"),
        pl.format("clock {} MHz vs pool median {} MHz", (pl.col("clock") / 1e6).round(0).cast(pl.Int64),
                  (pl.col("median_clock") / 1e6).round(0).cast(pl.Int64)).alias("detail"))
    limit = pl.col("pool").replace_strict(dict(hot_c), default=hot_default, return_dtype=pl.Float64)
    hot = d.filter(pl.col("temp_max") >= limit).select(
        pl.lit("hot").alias("issue"), "pool", "node", "device", pl.col("temp_max").alias("value"),
        pl.format("reached {} °C", pl.col("temp_max").round(1)).alias("detail"))
    order = {"stopped reporting": 0, "straggler": 1, "hot": 2}
    out = pl.concat([stopped, stragglers, hot], how="vertical_relaxed").select(
        [pl.col(c).cast(t) for c, t in schema.items()])
    return out.sort(pl.col("issue").replace_strict(order, return_dtype=pl.Int64), "pool", "node", "device")
