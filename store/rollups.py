"""1-minute and 1-hour rollups and the fleet rollups derived from them, refreshed for the touched window only;
raw-sample retention."""

from __future__ import annotations

from collections.abc import Sequence

import duckdb

from canonical.timeunits import HOUR_MS, MINUTE_MS
from store.db import fetch_one
from store.fleetrollups import refresh_fleet_hours, refresh_fleet_minutes

ROLLUP_TABLES = {"1m": ("rollup_1m", MINUTE_MS), "1h": ("rollup_1h", HOUR_MS)}
# 1m buckets are recomputed a slice of this many hours at a time: the aggregation's table of groups then stays
# small enough for the cache (a day of 2,750 series is 4M groups, an hour 165k)
SLICE_MS = HOUR_MS
_DIMS = "pool, node, device, metric, attributes, device_wide"
_VALUES = "count, sum, avg, min, max, last, last_ts"


def floor_to(ts: int, width: int) -> int:
    """Start of the bucket of the given width that holds ts."""
    return ts - ts % width


def raw_horizon(con: duckdb.DuckDBPyConnection) -> int | None:
    """Epoch ms before which raw samples were pruned, or None when nothing was."""
    row = fetch_one(con, "SELECT raw_horizon FROM retention WHERE id = 1")
    return int(row[0]) if row else None


def refresh_rollups(con: duckdb.DuckDBPyConnection, start_ms: int, end_ms: int,
                    nodes: Sequence[str] | None = None) -> tuple[int, int]:
    """Recompute the 1m buckets holding [start_ms, end_ms] from raw, then their hours from 1m.

    `nodes` narrows the work to the series of those nodes (the ones a run wrote): a node's buckets never
    depend on another node's samples, so one node's file does not recompute the whole fleet's day. Runs inside
    the caller's transaction. Buckets before the retention horizon are final (their raw samples are gone) and
    are left alone. Returns the number of 1m and 1h rows written.
    """
    lo_m, hi_m = floor_to(start_ms, MINUTE_MS), floor_to(end_ms, MINUTE_MS) + MINUTE_MS
    horizon = raw_horizon(con)
    if horizon is not None:
        lo_m = max(lo_m, floor_to(horizon + HOUR_MS - 1, HOUR_MS))
    if lo_m >= hi_m:
        return (0, 0)
    extra: list[object] = [] if nodes is None else [list(nodes)]
    only = "" if nodes is None else " AND list_contains(?, node)"
    con.execute(f"DELETE FROM rollup_1m WHERE bucket >= ? AND bucket < ?{only}", [lo_m, hi_m, *extra])
    # only the slices that hold samples: a run with one sample years before the others is two slices, not
    # one query per hour of the years between them
    held = con.execute(f"SELECT DISTINCT ts - ts % {SLICE_MS} FROM samples WHERE ts >= ? AND ts < ?{only}",
                       [lo_m, hi_m, *extra]).fetchall()
    for (start,) in sorted(held):  # slices are whole hours: each minute bucket is in one slice
        con.execute(
            f"INSERT INTO rollup_1m (bucket, {_DIMS}, {_VALUES}) SELECT ts - ts % {MINUTE_MS} AS bucket, {_DIMS}, "
            f"count(*), sum(value), avg(value), min(value), max(value), arg_max(value, ts), max(ts) FROM samples "
            f"WHERE ts >= ? AND ts < ?{only} GROUP BY ALL", [max(start, lo_m), min(start + SLICE_MS, hi_m), *extra])
    minute_rows = _changes(con, "rollup_1m", lo_m, hi_m, only, extra)
    refresh_fleet_minutes(con, lo_m, hi_m, only, extra)
    lo_h, hi_h = floor_to(lo_m, HOUR_MS), floor_to(hi_m - 1, HOUR_MS) + HOUR_MS
    con.execute(f"DELETE FROM rollup_1h WHERE bucket >= ? AND bucket < ?{only}", [lo_h, hi_h, *extra])
    con.execute(
        f"INSERT INTO rollup_1h (bucket, {_DIMS}, {_VALUES}) SELECT bucket - bucket % {HOUR_MS} AS hour, {_DIMS}, "
        f"sum(count), sum(sum), sum(sum) / sum(count), min(min), max(max), arg_max(last, last_ts), max(last_ts) "
        f"FROM rollup_1m WHERE bucket >= ? AND bucket < ?{only} GROUP BY ALL", [lo_h, hi_h, *extra])
    refresh_fleet_hours(con, lo_h, hi_h, only, extra)
    return minute_rows, _changes(con, "rollup_1h", lo_h, hi_h, only, extra)


def _changes(con: duckdb.DuckDBPyConnection, table: str, lo: int, hi: int, only: str, extra: list[object]) -> int:
    row = fetch_one(con, f"SELECT count(*) FROM {table} WHERE bucket >= ? AND bucket < ?{only}", [lo, hi, *extra])
    return int(row[0]) if row else 0


def prune_raw(con: duckdb.DuckDBPyConnection, keep_ms: int, now_ms: int) -> tuple[int, int]:
    """Drop raw samples older than now - keep (rounded down to the hour), keeping rollups complete.

    Returns (rows deleted, new horizon). One transaction: rollups of the pruned range are brought up to
    date from raw first, so nothing the console or exports read is lost.
    """
    horizon = floor_to(now_ms - keep_ms, HOUR_MS)
    current = raw_horizon(con)
    if current is not None and current >= horizon:
        return (0, current)
    con.execute("BEGIN TRANSACTION")
    try:
        row = fetch_one(con, "SELECT min(ts), count(*) FROM samples WHERE ts < ?", [horizon])
        oldest, doomed = (row[0], int(row[1])) if row else (None, 0)
        if oldest is not None:
            refresh_rollups(con, int(oldest), horizon - 1)
            con.execute("DELETE FROM samples WHERE ts < ?", [horizon])
        con.execute(
            "INSERT INTO retention VALUES (1, ?) ON CONFLICT (id) DO UPDATE SET raw_horizon = excluded.raw_horizon",
            [horizon])
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    return doomed, horizon
