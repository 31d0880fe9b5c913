"""Software versions seen on exporter labels: per pool, node, device and component, with first/last seen."""

from __future__ import annotations

import duckdb
import polars as pl


def observed_versions(con: duckdb.DuckDBPyConnection, *, pool: str | None = None,
                      component: str | None = None) -> pl.DataFrame:
    """Rows of the versions table, newest last seen first within each node and component."""
    where, params = [], []
    if pool is not None:
        where.append("pool = ?")
        params.append(pool)
    if component is not None:
        where.append("component = ?")
        params.append(component)
    cond = f" WHERE {' AND '.join(where)}" if where else ""
    return con.sql(
        "SELECT pool, node, device, component, version, first_seen, last_seen FROM versions"
        f"{cond} ORDER BY pool, node, device, component, last_seen DESC, version", params=params).pl()


def current_versions(con: duckdb.DuckDBPyConnection, *, pool: str | None = None) -> pl.DataFrame:
    """The latest version of each component per pool and node (device-level versions keep their device)."""
    versions = observed_versions(con, pool=pool)
    return versions.sort("last_seen", descending=True).unique(
        subset=["pool", "node", "device", "component"], keep="first").sort("pool", "node", "device", "component")
