"""Stored state of stateful error series (sticky codes, error counters): lookups and change points."""

from __future__ import annotations

import duckdb
import polars as pl

from canonical.schemas import STATE_KEY, STATE_SCHEMA

# the answer to a lookup: per key and `before`, the newest stored change point strictly before it
PRIOR_SCHEMA = {**{k: STATE_SCHEMA[k] for k in STATE_KEY}, "before": pl.Int64(), "ts": pl.Int64(),
                "value": pl.Float64()}


def prior_error_state(con: duckdb.DuckDBPyConnection, keys: pl.DataFrame) -> pl.DataFrame:
    """For each (node, device, source, before): the newest stored raw value strictly before `before`, and its ts."""
    if keys.height == 0:
        return pl.DataFrame(schema=PRIOR_SCHEMA)
    con.register("_hp_state_keys", keys.select("node", "device", "source", "before").to_arrow())
    try:
        return con.sql(
            "SELECT k.node, k.device, k.source, k.before, max(s.ts) AS ts, arg_max(s.value, s.ts) AS value "
            "FROM _hp_state_keys k JOIN error_state s ON s.node = k.node AND s.device = k.device "
            "AND s.source = k.source AND s.ts < k.before GROUP BY k.node, k.device, k.source, k.before "
            "ORDER BY k.node, k.device, k.source, k.before").pl().cast(PRIOR_SCHEMA)
    finally:
        con.unregister("_hp_state_keys")


def record_error_state(con: duckdb.DuckDBPyConnection, changes: pl.DataFrame) -> int:
    """Keep change points (inside the caller's transaction); ones already stored are left alone."""
    if changes.height == 0:
        return 0
    con.register("_hp_state", changes.select(list(STATE_SCHEMA)).to_arrow())
    try:
        rows = con.execute(
            "INSERT INTO error_state SELECT node, device, source, ts, value FROM _hp_state "
            "ON CONFLICT (node, device, source, ts) DO NOTHING").fetchall()
    finally:
        con.unregister("_hp_state")
    return int(rows[0][0]) if rows else 0
