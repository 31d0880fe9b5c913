"""The fleet views' rollups (device minutes and hours, node minutes and hours), derived from rollup_1m."""

from __future__ import annotations

import duckdb

from canonical.timeunits import HOUR_MS

BUSY_UTIL = 0.5  # a device-minute at or above this mean utilization is busy
CLOCK, UTIL = "accelerator.clock", "accelerator.utilization"
# the gauges Fleet health charts per pool; node_1m sums them over each node's devices
NODE_METRICS = (UTIL, "accelerator.memory.used", "accelerator.memory.total", "accelerator.power",
                "accelerator.temperature", CLOCK)
FLEET_TABLES = ("device_minutes", "device_hours", "node_1m", "node_1h")


def refresh_fleet_rollups(con: duckdb.DuckDBPyConnection, lo_m: int, hi_m: int, only: str,
                          extra: list[object]) -> None:
    """Rebuild the fleet rollups of minutes [lo_m, hi_m) and of the hours holding them from rollup_1m.

    `only` and `extra` narrow it to the nodes refresh_rollups narrows to; it runs after rollup_1m and inside
    the same transaction. lo_m and hi_m are minute bounds.
    """
    lo_h, hi_h = lo_m - lo_m % HOUR_MS, (hi_m - 1) - (hi_m - 1) % HOUR_MS + HOUR_MS
    for table in ("device_minutes", "node_1m"):
        con.execute(f"DELETE FROM {table} WHERE bucket >= ? AND bucket < ?{only}", [lo_m, hi_m, *extra])
    con.execute(f"""
        INSERT INTO device_minutes
        SELECT bucket, pool, node, device,
            sum(sum) FILTER (WHERE metric = ?) / sum(count) FILTER (WHERE metric = ?),
            sum(sum) FILTER (WHERE metric = ?) / sum(count) FILTER (WHERE metric = ?)
        FROM rollup_1m
        WHERE bucket >= ? AND bucket < ?{only} AND device <> '' AND device_wide AND metric IN (?, ?)
        GROUP BY bucket, pool, node, device""", [CLOCK, CLOCK, UTIL, UTIL, lo_m, hi_m, *extra, CLOCK, UTIL])
    con.execute(f"""
        INSERT INTO node_1m
        SELECT bucket, pool, node, metric, sum(count), sum(sum) FROM rollup_1m
        WHERE bucket >= ? AND bucket < ?{only} AND device <> '' AND device_wide
            AND metric IN ({", ".join("?" * len(NODE_METRICS))})
        GROUP BY bucket, pool, node, metric""", [lo_m, hi_m, *extra, *NODE_METRICS])
    for table in ("device_hours", "node_1h"):
        con.execute(f"DELETE FROM {table} WHERE bucket >= ? AND bucket < ?{only}", [lo_h, hi_h, *extra])
    con.execute(f"""
        INSERT INTO device_hours
        SELECT bucket - bucket % {HOUR_MS}, pool, node, device, count(*) FILTER (WHERE util >= ?), max(clock)
        FROM device_minutes WHERE bucket >= ? AND bucket < ?{only} GROUP BY ALL""",
        [BUSY_UTIL, lo_h, hi_h, *extra])
    con.execute(f"""
        INSERT INTO node_1h
        SELECT bucket - bucket % {HOUR_MS}, pool, node, metric, sum(count), sum(sum)
        FROM node_1m WHERE bucket >= ? AND bucket < ?{only} GROUP BY ALL""", [lo_h, hi_h, *extra])
