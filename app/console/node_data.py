"""The Node and Device pages' queries: one node's or device's series, events, versions, and the known devices."""

from __future__ import annotations

import duckdb
import polars as pl

from app.console.data import query
from store.views import markers
from store.views import node as views
from store.views.window import Window


@query
def device_series(con: duckdb.DuckDBPyConnection, start: int, end: int, pool: str, node: str, device: str | None,
                  step: int) -> pl.DataFrame:
    """Every canonical metric of the node (device None) or device, per step bucket and device."""
    return views.metric_series(con, Window(start, end), pool, node, device, step)


@query
def device_events(con: duckdb.DuckDBPyConnection, start: int, end: int, pool: str, node: str,
                  device: str | None) -> pl.DataFrame:
    """The node's or device's error events in the window, newest first."""
    return views.error_events(con, Window(start, end), pool, node, device)


@query
def device_versions(con: duckdb.DuckDBPyConnection, pool: str, node: str, device: str | None) -> pl.DataFrame:
    """Every version the node (or device) reported."""
    return views.versions(con, pool, node, device)


@query
def known_devices(con: duckdb.DuckDBPyConnection, pools: tuple[str, ...]) -> pl.DataFrame:
    """The nodes and devices that reported in these pools (every pool when empty)."""
    return views.known_devices(con, pools)


@query
def node_devices(con: duckdb.DuckDBPyConnection, pool: str, node: str) -> pl.DataFrame:
    """The node's devices with their first and newest sample."""
    return views.node_devices(con, pool, node)


@query
def device_marks(con: duckdb.DuckDBPyConnection, start: int, end: int, pool: str, node: str, device: str | None,
                 step: int) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The node's (or device's) severe error events per bucket and its version changes in the window."""
    w = Window(start, end, (pool,))
    return (markers.severe_events(con, w, step, node, device), markers.version_changes(con, w, node, device))
