"""Fleet registry page: one row per pool of the newest registry."""

from __future__ import annotations

import duckdb
import polars as pl

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
