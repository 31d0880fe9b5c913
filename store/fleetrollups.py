"""The fleet views' rollups (device minutes and hours, node and pool minutes and hours), derived from the rollups."""

from __future__ import annotations

import duckdb

from canonical.metrics import CLOCK, ERRORS, HEALTH, MEMORY_TOTAL, MEMORY_USED, POWER, TEMPERATURE, UTILIZATION
from canonical.timeunits import HOUR_MS

BUSY_UTIL = 0.5  # a device-minute at or above this mean utilization is busy
UTIL, TEMP, USED, TOTAL = UTILIZATION, TEMPERATURE, MEMORY_USED, MEMORY_TOTAL
SEVERE = ("fatal", "critical")  # "critical" is what some vendors call fatal before the taxonomy maps it
# the gauges Fleet health charts per pool; node_1m sums them over each node's devices
NODE_METRICS = (UTIL, USED, TOTAL, POWER, TEMP, CLOCK)
FLEET_TABLES = ("device_minutes", "device_hours", "node_1m", "node_1h", "pool_1m", "pool_1h", "node_events_1m")
# device_hours columns read from a device-hour's device-wide rollup_1h rows: (column, aggregate, metric)
HOUR_COLUMNS = (
    ("util_sum", "sum(sum)", UTIL), ("util_count", "sum(count)", UTIL),
    ("clock_sum", "sum(sum)", CLOCK), ("clock_count", "sum(count)", CLOCK),
    ("power_sum", "sum(sum)", POWER), ("power_count", "sum(count)", POWER),
    ("used_sum", "sum(sum)", USED), ("total_sum", "sum(sum)", TOTAL), ("temp_max", "max(max)", TEMP),
    ("health_last", "arg_max(last, last_ts)", HEALTH), ("health_ts", "max(last_ts)", HEALTH),
    ("used_last", "arg_max(last, last_ts)", USED), ("used_ts", "max(last_ts)", USED),
    ("total_last", "arg_max(last, last_ts)", TOTAL), ("total_ts", "max(last_ts)", TOTAL),
)


def refresh_fleet_minutes(con: duckdb.DuckDBPyConnection, lo_m: int, hi_m: int, only: str,
                          extra: list[object]) -> None:
    """Rebuild device_minutes, node_1m and node_events_1m of minutes [lo_m, hi_m) from rollup_1m.

    `only` and `extra` narrow it to the nodes refresh_rollups narrows to; it runs after rollup_1m, inside the
    same transaction.
    """
    for table in ("device_minutes", "node_1m", "node_events_1m"):
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
    severities = ", ".join("?" * len(SEVERE))
    con.execute(f"""
        INSERT INTO node_events_1m
        SELECT bucket, pool, node, json_extract_string(attributes, '$.severity'),
            coalesce(json_extract_string(attributes, '$.code'), ''), sum(sum)
        FROM rollup_1m
        WHERE bucket >= ? AND bucket < ?{only} AND metric = ? AND max > 0
            AND json_extract_string(attributes, '$.severity') IN ({severities})
        GROUP BY ALL""", [lo_m, hi_m, *extra, ERRORS, *SEVERE])
    _refresh_pools(con, "pool_1m", "node_1m", lo_m, hi_m, only, extra)


def refresh_fleet_hours(con: duckdb.DuckDBPyConnection, lo_h: int, hi_h: int, only: str,
                        extra: list[object]) -> None:
    """Rebuild device_hours and node_1h of hours [lo_h, hi_h) from rollup_1h, device_minutes and node_1m.

    Runs after rollup_1h and refresh_fleet_minutes, narrowed and inside the transaction as they are.
    """
    for table in ("device_hours", "node_1h"):
        con.execute(f"DELETE FROM {table} WHERE bucket >= ? AND bucket < ?{only}", [lo_h, hi_h, *extra])
    columns = ",\n".join(f"{agg} FILTER (WHERE metric = ? AND device_wide) AS {name}" for name, agg, _ in HOUR_COLUMNS)
    names = ", ".join(name for name, _, _ in HOUR_COLUMNS)
    con.execute(f"""
        INSERT INTO device_hours
        WITH h AS (
            SELECT bucket, pool, node, device, {columns},
                max(last_ts) FILTER (WHERE metric <> ?) AS last_ts, max(last_ts) AS seen_ts
            FROM rollup_1h WHERE bucket >= ? AND bucket < ?{only} AND metric LIKE 'accelerator.%'
            GROUP BY bucket, pool, node, device
        ), m AS (
            SELECT bucket - bucket % {HOUR_MS} AS bucket, pool, node, device, count(*) AS minutes,
                count(*) FILTER (WHERE util >= ?) AS busy, max(clock) AS max_clock
            FROM device_minutes WHERE bucket >= ? AND bucket < ?{only} GROUP BY ALL
        )
        SELECT h.bucket, h.pool, h.node, h.device, coalesce(m.minutes, 0), coalesce(m.busy, 0), m.max_clock,
            {names}, last_ts, seen_ts
        FROM h LEFT JOIN m USING (bucket, pool, node, device)""",
        [*(metric for _, _, metric in HOUR_COLUMNS), ERRORS, lo_h, hi_h, *extra, BUSY_UTIL, lo_h, hi_h, *extra])
    con.execute(f"""
        INSERT INTO node_1h
        SELECT bucket - bucket % {HOUR_MS}, pool, node, metric, sum(count), sum(sum)
        FROM node_1m WHERE bucket >= ? AND bucket < ?{only} GROUP BY ALL""", [lo_h, hi_h, *extra])
    _refresh_pools(con, "pool_1h", "node_1h", lo_h, hi_h, only, extra)


def _refresh_pools(con: duckdb.DuckDBPyConnection, table: str, source: str, lo: int, hi: int, only: str,
                   extra: list[object]) -> None:
    """Rebuild `table`'s buckets [lo, hi) of the pools whose nodes the run wrote, summing `source` over nodes."""
    # a pool's sum needs all its nodes, so the narrowing is by the pools of the run's nodes, read from the
    # node rollup (which holds their rows and nothing else's the run could have changed)
    pools = [p for (p,) in con.execute(f"SELECT DISTINCT pool FROM {source} WHERE bucket >= ? AND bucket < ?{only}",
                                      [lo, hi, *extra]).fetchall()]
    if only and not pools:
        return
    con.execute(f"DELETE FROM {table} WHERE bucket >= ? AND bucket < ?"
                + ("" if not only else " AND list_contains(?, pool)"), [lo, hi, *([pools] if only else [])])
    con.execute(f"""
        INSERT INTO {table}
        SELECT bucket, pool, metric, sum(count), sum(sum) FROM {source}
        WHERE bucket >= ? AND bucket < ?{"" if not only else " AND list_contains(?, pool)"}
        GROUP BY bucket, pool, metric""", [lo, hi, *([pools] if only else [])])
