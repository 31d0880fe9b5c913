"""Read queries shared by the console, exports and the CLI."""

from __future__ import annotations

import duckdb
import polars as pl

from store.db import fetch_one
from store.snapshots import latest_registry


def fleet_overview(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """One row per pool from the newest registry: chip, devices, cost per hour, model, declared stack."""
    snap = latest_registry(con)
    if snap is None:
        return pl.DataFrame()
    reg = snap.registry
    rows = []
    for p in reg.pools:
        chip = reg.chip_of(p)
        rows.append({
            "pool": p.id, "vendor": chip.vendor, "chip": chip.name, "devices": p.devices,
            "nodes": p.nodes, "cost_per_hour": round(p.hourly_cost, 2),
            "model": p.serving.model if p.serving else "",
            "engine": p.serving.engine if p.serving else "",
            "stack": ", ".join(f"{k} {v}" for k, v in sorted(p.stack.items())),
            "onboarding": p.onboarding.stage,
        })
    return pl.DataFrame(rows)


def table_counts(con: duckdb.DuckDBPyConnection) -> dict[str, int]:
    """Row counts of the main tables, for status lines and empty states."""
    out = {}
    for table in ("samples", "rejects", "versions", "requests", "replay_runs", "registry_snapshots"):
        row = fetch_one(con, f"SELECT count(*) FROM {table}")  # table names are constants
        out[table] = int(row[0]) if row else 0
    return out
