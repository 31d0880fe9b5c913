"""The console's reads of the store: one cached query per question a page asks (see cache.py for how they run).

Each is a plain function of a read-only connection and plain arguments, made a cached call of the database path
and those arguments by `query`; the few that can return many rows (an export file, a replay's requests) are read
uncached, when they are asked for.
"""

from __future__ import annotations

from typing import Any

import duckdb
import polars as pl

from app.console.cache import query, read
from app.status_read import read_facts
from pool_registry import Registry
from replay.planner.compat import compatibility
from status.evaluate import Facts, warning_temperatures
from status.rules import load_rules
from store import StoreError, latest_registry, replay_runs, runways
from store import requests as stored
from store.views import (
    cost,
    coverage,
    drift,
    export,
    faults,
    fleet,
    health,
    markers,
    reliability,
    reuse,
    runs,
    versions,
)
from store.views.window import Window, data_span


@query
def fleet_overview(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """Pools of the newest registry."""
    return fleet.fleet_overview(con)


@query
def registry(con: duckdb.DuckDBPyConnection) -> Registry | None:
    """The newest registry, or None when none was loaded."""
    snap = latest_registry(con)
    return snap.registry if snap else None


@query
def span(con: duckdb.DuckDBPyConnection) -> tuple[int, int] | None:
    """First and last sample time in the store."""
    return data_span(con)


@query
def tiles(con: duckdb.DuckDBPyConnection, start: int, end: int, pools: tuple[str, ...]) -> pl.DataFrame:
    """Fleet-health tile numbers per pool."""
    return health.pool_tiles(con, Window(start, end, pools), list(pools))


@query
def status_facts(con: duckdb.DuckDBPyConnection, start: int, end: int, pools: tuple[str, ...]) -> Facts:
    """What the status rules judge in the window (the page sets now_ms: a cached value must not hold the clock)."""
    return read_facts(con, Window(start, end, pools), list(pools), now_ms=0)


@query
def series(con: duckdb.DuckDBPyConnection, start: int, end: int, pools: tuple[str, ...], step: int) -> pl.DataFrame:
    """Pool-level time series of the health metrics."""
    return health.metric_series(con, Window(start, end, pools), step)


@query
def worst_devices(con: duckdb.DuckDBPyConnection, start: int, end: int, pools: tuple[str, ...]) -> pl.DataFrame:
    """Stragglers, hot and silent devices: hot from each pool's warning temperature (its chip's, else the rules')."""
    snap = latest_registry(con)
    rules = load_rules()
    return health.worst_devices(con, Window(start, end, pools),
                                warning_temperatures(snap.registry if snap else None, rules),
                                rules.temperature.warning)


@query
def version_drift(con: duckdb.DuckDBPyConnection, start: int, end: int, pools: tuple[str, ...]) -> pl.DataFrame:
    """Nodes whose versions observed in the window differ from the declared stack."""
    snap = latest_registry(con)
    if snap is None:
        return pl.DataFrame(schema=drift.DRIFT_SCHEMA)
    return drift.version_drift(con, snap.registry, list(pools), Window(start, end, pools))


@query
def version_report(con: duckdb.DuckDBPyConnection, start: int, end: int, pools: tuple[str, ...]) -> dict[str, Any]:
    """The Versions page: matrix cells, compatibility grid, coverage by exporter version and per node, and vanished
    metrics."""
    snap, w = latest_registry(con), Window(start, end, pools)
    if snap is None:
        raise StoreError("no registry loaded")
    reg = snap.registry
    per_node = coverage.node_coverage(con, reg, w)
    return {"cells": versions.version_matrix(con, reg, w), "compat": compatibility(reg, pools),
            "coverage": coverage.exporter_coverage(con, reg, w, per_node), "per_node": per_node,
            "vanished": coverage.vanished_metrics(con, reg, w, per_node)}


@query
def error_timeline(con: duckdb.DuckDBPyConnection, start: int, end: int, pools: tuple[str, ...],
                   step: int) -> pl.DataFrame:
    """Error events per bucket, pool and class."""
    return reliability.error_timeline(con, Window(start, end, pools), step)


@query
def severe_events(con: duckdb.DuckDBPyConnection, start: int, end: int, pools: tuple[str, ...],
                  step: int) -> pl.DataFrame:
    """Fatal error events per bucket, pool and node, to mark on the time series."""
    return markers.severe_events(con, Window(start, end, pools), step)


@query
def version_changes(con: duckdb.DuckDBPyConnection, start: int, end: int, pools: tuple[str, ...]) -> pl.DataFrame:
    """Driver, firmware, exporter and engine version changes of the window, to mark on the time series."""
    return markers.version_changes(con, Window(start, end, pools))


@query
def error_events(con: duckdb.DuckDBPyConnection, start: int, end: int, pools: tuple[str, ...]) -> pl.DataFrame:
    """The newest error events of the window."""
    return reliability.error_events(con, Window(start, end, pools))


@query
def reliability_index(con: duckdb.DuckDBPyConnection, start: int, end: int, pools: tuple[str, ...]) -> pl.DataFrame:
    """Healthy over observed device-hours per pool, the registry's devices that never reported counted."""
    snap = latest_registry(con)
    declared = {p.id: p.devices for p in snap.registry.pools} if snap else None
    return reliability.reliability(con, Window(start, end, pools), declared)


@query
def nodes_to_drain(con: duckdb.DuckDBPyConnection, start: int, end: int, pools: tuple[str, ...]) -> pl.DataFrame:
    """Nodes with fatal errors, unhealthy or silent devices."""
    return reliability.nodes_to_drain(con, Window(start, end, pools))


@query
def cost_by_pool(con: duckdb.DuckDBPyConnection, start: int, end: int, pools: tuple[str, ...]) -> pl.DataFrame:
    """Money per pool, busy and idle, and per million tokens."""
    snap = latest_registry(con)
    if snap is None:
        return pl.DataFrame()
    return cost.cost_by_pool(con, snap.registry, Window(start, end, pools), list(pools))


@query
def routing_mix(con: duckdb.DuckDBPyConnection, start: int, end: int, pools: tuple[str, ...],
                step: int) -> pl.DataFrame:
    """Requests per bucket and serving pool."""
    return cost.routing_mix(con, Window(start, end, pools), step)


@query
def metric_names(con: duckdb.DuckDBPyConnection, start: int, end: int, pools: tuple[str, ...]) -> list[str]:
    """Canonical metrics present in the window."""
    return export.metrics_in(con, Window(start, end, pools))


@query
def export_count(con: duckdb.DuckDBPyConnection, start: int, end: int, pools: tuple[str, ...],
                 metrics: tuple[str, ...], resolution: str) -> tuple[int, str]:
    """How many rows an export of this selection holds, and the resolution 'auto' picked."""
    return export.count_rows(con, Window(start, end, pools), list(metrics), resolution)


@query
def export_preview(con: duckdb.DuckDBPyConnection, start: int, end: int, pools: tuple[str, ...],
                   metrics: tuple[str, ...], resolution: str) -> pl.DataFrame:
    """The first rows of an export of this selection."""
    return export.preview(con, Window(start, end, pools), list(metrics), resolution)


def _export_bytes(con: duckdb.DuckDBPyConnection, start: int, end: int, pools: tuple[str, ...],
                  metrics: tuple[str, ...], fmt: str, resolution: str) -> bytes:
    return export.export_bytes(con, Window(start, end, pools), list(metrics), fmt, resolution)


def export_bytes(path: str, start: int, end: int, pools: tuple[str, ...], metrics: tuple[str, ...],
                 fmt: str, resolution: str) -> bytes:
    """The export file itself (not cached: it is built when the download is clicked)."""
    return read(_export_bytes, path, (start, end, pools, metrics, fmt, resolution))


@query
def ingest_sources(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """What each source stored last, from the ingest runs."""
    return runs.sources(con)


@query
def request_traces(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """Stored traces: name, request count, first and last arrival."""
    return stored.list_traces(con)


@query
def request_count(con: duckdb.DuckDBPyConnection, trace: str | None, start: int | None, end: int | None) -> int:
    """How many stored requests a replay of this trace and window would read."""
    return stored.count_requests(con, trace=trace, start_ms=start, end_ms=end)


def _stored_window(con: duckdb.DuckDBPyConnection, trace: str | None, start: int | None,
                   end: int | None) -> tuple[pl.DataFrame, pl.DataFrame]:
    return (stored.read_requests(con, trace=trace, start_ms=start, end_ms=end),
            stored.read_history(con, trace=trace, before_ms=start))


def stored_window(path: str, trace: str | None, start: int | None,
                  end: int | None) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The stored requests of a trace and window and those that completed before it (what the online predictor
    starts from, as `hetpool replay run` reads them), in one read when a replay starts (not cached: they can be
    many)."""
    result: tuple[pl.DataFrame, pl.DataFrame] = read(_stored_window, path, (trace, start, end))
    return result


def _fault_telemetry(con: duckdb.DuckDBPyConnection, first: int | None, last: int | None,
                     days: float) -> pl.DataFrame:
    return faults.telemetry_for(con, first, last, days)


def fault_telemetry(path: str, first: int | None, last: int | None, days: float) -> pl.DataFrame:
    """Each pool's failures and throttling before the replayed traffic, as `hetpool replay run` reads them."""
    result: pl.DataFrame = read(_fault_telemetry, path, (first, last, days))
    return result


def _observed_reuse(con: duckdb.DuckDBPyConnection, first: int | None, last: int | None) -> dict[str, float]:
    if first is None or last is None:
        return {}
    rows = reuse.observed_reuse(con, Window(first, last + 1))
    return dict(zip(rows["pool"].to_list(), rows["observed_reuse"].to_list(), strict=True)) if rows.height else {}


def observed_reuse(path: str, first: int | None, last: int | None) -> dict[str, float]:
    """Each pool's prefix-cache hit ratio its engines reported while the replayed traffic arrived (pool -> ratio;
    a pool whose engines report none is absent)."""
    result: dict[str, float] = read(_observed_reuse, path, (first, last))
    return result


@query
def saved_runs(con: duckdb.DuckDBPyConnection, limit: int = 200) -> pl.DataFrame:
    """Saved replays, newest first."""
    return replay_runs.list_replay_runs(con, limit)


@query
def saved_run(con: duckdb.DuckDBPyConnection, run_id: int) -> dict[str, Any] | None:
    """One saved replay with its JSON decoded, or None."""
    return replay_runs.get_replay_run(con, run_id)


@query
def latest_runways(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """The newest stored capacity runway of each pool (store.runways)."""
    return runways.latest_runways(con)
