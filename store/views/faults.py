"""What the replay needs of a window's failures and throttling, per pool, from the figures the console shows.

- hours: hours in which the pool reported at all;
- device_hours: the device-hours of the devices that reported, as the reliability index counts them
  (store.views.reliability's reported_hours: a device that never reported cannot fail in a replay);
- fatal_events: fatal error events recorded in the window (the Errors and reliability page's fatal class);
- devices_lost: devices that stopped reporting before the window's end (as "nodes to drain" counts them);
- busy_minutes, throttled_minutes: device-minutes busy, and busy below the throttle ratio of the pool's
  reference clock (store.views.health.device_throttling);
- throttled_clock: the mean clock in those throttled minutes, as a share of the reference clock.
"""

from __future__ import annotations

import duckdb
import polars as pl

from canonical.timeunits import DAY_MS, HOUR_MS
from store.views.health import BUSY_UTIL, THROTTLE_RATIO, _device_minutes
from store.views.reliability import nodes_to_drain, reliability
from store.views.window import Window, frame

SCHEMA = {"pool": pl.String, "hours": pl.Int64, "device_hours": pl.Float64, "fatal_events": pl.Float64,
          "devices_lost": pl.Int64, "busy_minutes": pl.Int64, "throttled_minutes": pl.Int64,
          "throttled_clock": pl.Float64}


def fault_telemetry(con: duckdb.DuckDBPyConnection, w: Window) -> pl.DataFrame:
    """Per pool that reported in the window: the columns of SCHEMA."""
    rel = reliability(con, w).select("pool", pl.col("hours").cast(pl.Int64),
                                     pl.col("reported_hours").cast(pl.Float64).alias("device_hours"))
    if rel.height == 0:
        return pl.DataFrame(schema=SCHEMA)
    drain = nodes_to_drain(con, w).group_by("pool").agg(
        pl.col("fatal_events").sum().cast(pl.Float64), pl.col("silent_devices").sum().cast(pl.Int64)
        .alias("devices_lost"))
    minutes, params = _device_minutes(w)
    clocks = frame(con, f"""
        WITH m AS ({minutes}), ref AS (SELECT pool, max(clock) AS ref FROM m GROUP BY pool)
        SELECT m.pool, count(*) FILTER (WHERE util >= ?) AS busy_minutes,
            count(*) FILTER (WHERE util >= ? AND clock < ? * ref.ref) AS throttled_minutes,
            -- rounded: a parallel average's last bits depend on the order its threads add up in
            round(avg(clock / ref.ref) FILTER (WHERE util >= ? AND clock < ? * ref.ref), 9) AS throttled_clock
        FROM m JOIN ref USING (pool) GROUP BY m.pool""",
        [*params, BUSY_UTIL, BUSY_UTIL, THROTTLE_RATIO, BUSY_UTIL, THROTTLE_RATIO])
    out = rel.join(drain, on="pool", how="left").join(clocks, on="pool", how="left")
    return out.select(
        pl.col("pool"), pl.col("hours"), pl.col("device_hours"), pl.col("fatal_events").fill_null(0.0),
        pl.col("devices_lost").fill_null(0), pl.col("busy_minutes").fill_null(0).cast(pl.Int64),
        pl.col("throttled_minutes").fill_null(0).cast(pl.Int64), pl.col("throttled_clock").cast(pl.Float64),
    ).sort("pool")


def fault_telemetry_before(con: duckdb.DuckDBPyConnection, end_ms: int | None, days: float) -> pl.DataFrame:
    """fault_telemetry over the `days` before end_ms, or before the newest stored hour when end_ms is None."""
    if end_ms is None:
        row = con.execute("SELECT max(bucket) FROM rollup_1h").fetchone()
        if row is None or row[0] is None:
            return pl.DataFrame(schema=SCHEMA)
        end_ms = int(row[0]) + HOUR_MS
    start_ms = end_ms - int(days * DAY_MS)
    return fault_telemetry(con, Window(start_ms, end_ms))


def fault_telemetry_within(con: duckdb.DuckDBPyConnection, start_ms: int, end_ms: int) -> pl.DataFrame:
    """fault_telemetry over [start_ms, end_ms)."""
    return fault_telemetry(con, Window(start_ms, end_ms)) if end_ms > start_ms else pl.DataFrame(schema=SCHEMA)


MIN_HOURS = 24  # less telemetry than this before the traffic, and the traffic's own window is read instead


def telemetry_for(con: duckdb.DuckDBPyConnection, first_ms: int | None, last_ms: int | None,
                  days: float) -> pl.DataFrame:
    """The fault telemetry a replay of traffic arriving from first_ms to last_ms uses: the `days` before it; when
    the store holds less than a day of it (the store starts with the traffic), the traffic's own window; for a
    trace file (first_ms None), the `days` before the newest stored data."""
    frame = fault_telemetry_before(con, first_ms, days)
    if first_ms is not None and last_ms is not None and (frame.height == 0 or
                                                         int(frame["hours"].max()) < MIN_HOURS):  # type: ignore[arg-type]
        frame = fault_telemetry_within(con, first_ms, last_ms + 1)
    return frame
