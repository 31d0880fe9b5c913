"""Computed capacity runways in `runways`: one row per pool and computation, newest read back per pool."""

from __future__ import annotations

import json
from typing import Any

import duckdb
import polars as pl

FIELDS = ("pool", "today", "horizon_weeks", "tolerance", "candidate", "growth_per_week", "growth_low", "growth_high",
          "breaks_on", "breaks_on_low", "breaks_on_high", "violation_rate_now", "replicas_to_add",
          "added_cost_per_month_usd", "status", "notes")


def save_runway(con: duckdb.DuckDBPyConnection, computed_ms: int, rows: list[dict[str, Any]]) -> int:
    """Store one computation's rows (FIELDS each, notes a list of strings); return how many were written.
    The same computed_ms and pool again replaces the row, so a retried save never duplicates."""
    for r in rows:
        con.execute(f"INSERT OR REPLACE INTO runways (computed_ms, {', '.join(FIELDS)}) "
                    f"VALUES (?, {', '.join('?' for _ in FIELDS)})",
                    [computed_ms, *(json.dumps(r["notes"]) if f == "notes" else r[f] for f in FIELDS)])
    return len(rows)


def latest_runways(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """The newest runway of every pool (computed_ms and FIELDS; notes as JSON text), by pool."""
    return con.sql(f"SELECT computed_ms, {', '.join(FIELDS)} FROM runways "
                   "QUALIFY row_number() OVER (PARTITION BY pool ORDER BY computed_ms DESC) = 1 ORDER BY pool").pl()
