"""All console data access: one cached read-only connection, a cursor per query, cached results.

Every function takes the database path first (so a cache entry never outlives a change of database) and
the window as plain numbers, and returns what the store's view returns.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TypeVar

import duckdb
import polars as pl
import streamlit as st

from pool_registry import Registry
from store import ENV_DB, connect, latest_registry, queries, resolve_db_path
from store.views import cost, drift, export, health, reliability
from store.views.window import Window, data_span

CACHE_TTL_S = 60
T = TypeVar("T")


def db_path() -> str:
    """The database the console serves: $HETPOOL_DB, else Streamlit secrets, else ./hetpool.duckdb."""
    env = os.environ.get(ENV_DB)
    if env:
        return env
    try:
        secret = st.secrets.get("hetpool_db")
    except (FileNotFoundError, KeyError, st.errors.StreamlitSecretNotFoundError):
        secret = None
    return str(resolve_db_path(secret))


@st.cache_resource(show_spinner=False)
def _connection(path: str) -> duckdb.DuckDBPyConnection:
    return connect(path, read_only=True)


def _run(path: str, query: Callable[[duckdb.DuckDBPyConnection], T]) -> T:
    cur = _connection(path).cursor()
    try:
        return query(cur)
    finally:
        cur.close()


@st.cache_data(ttl=CACHE_TTL_S, show_spinner=False)
def fleet_overview(path: str) -> pl.DataFrame:
    """Pools of the newest registry."""
    return _run(path, queries.fleet_overview)


@st.cache_data(ttl=CACHE_TTL_S, show_spinner=False)
def registry(path: str) -> Registry | None:
    """The newest registry, or None when none was loaded."""
    snap = _run(path, latest_registry)
    return snap.registry if snap else None


@st.cache_data(ttl=CACHE_TTL_S, show_spinner=False)
def span(path: str) -> tuple[int, int] | None:
    """First and last sample time in the store."""
    return _run(path, data_span)


@st.cache_data(ttl=CACHE_TTL_S, show_spinner=False)
def tiles(path: str, start: int, end: int, pools: tuple[str, ...]) -> pl.DataFrame:
    """Fleet-health tile numbers per pool."""
    return _run(path, lambda c: health.pool_tiles(c, Window(start, end, pools), list(pools)))


@st.cache_data(ttl=CACHE_TTL_S, show_spinner=False)
def series(path: str, start: int, end: int, pools: tuple[str, ...], step: int) -> pl.DataFrame:
    """Pool-level time series of the health metrics."""
    return _run(path, lambda c: health.metric_series(c, Window(start, end, pools), step))


@st.cache_data(ttl=CACHE_TTL_S, show_spinner=False)
def worst_devices(path: str, start: int, end: int, pools: tuple[str, ...]) -> pl.DataFrame:
    """Stragglers, hot and silent devices."""
    return _run(path, lambda c: health.worst_devices(c, Window(start, end, pools)))


@st.cache_data(ttl=CACHE_TTL_S, show_spinner=False)
def version_drift(path: str, pools: tuple[str, ...]) -> pl.DataFrame:
    """Nodes whose observed versions differ from the declared stack."""
    reg = registry(path)
    if reg is None:
        return pl.DataFrame(schema=drift.DRIFT_SCHEMA)
    return _run(path, lambda c: drift.version_drift(c, reg, list(pools)))


@st.cache_data(ttl=CACHE_TTL_S, show_spinner=False)
def error_timeline(path: str, start: int, end: int, pools: tuple[str, ...], step: int) -> pl.DataFrame:
    """Error events per bucket, pool and class."""
    return _run(path, lambda c: reliability.error_timeline(c, Window(start, end, pools), step))


@st.cache_data(ttl=CACHE_TTL_S, show_spinner=False)
def error_events(path: str, start: int, end: int, pools: tuple[str, ...]) -> pl.DataFrame:
    """The newest error events of the window."""
    return _run(path, lambda c: reliability.error_events(c, Window(start, end, pools)))


@st.cache_data(ttl=CACHE_TTL_S, show_spinner=False)
def reliability_index(path: str, start: int, end: int, pools: tuple[str, ...]) -> pl.DataFrame:
    """Healthy over observed device-hours per pool."""
    return _run(path, lambda c: reliability.reliability(c, Window(start, end, pools)))


@st.cache_data(ttl=CACHE_TTL_S, show_spinner=False)
def nodes_to_drain(path: str, start: int, end: int, pools: tuple[str, ...]) -> pl.DataFrame:
    """Nodes with fatal errors, unhealthy or silent devices."""
    return _run(path, lambda c: reliability.nodes_to_drain(c, Window(start, end, pools)))


@st.cache_data(ttl=CACHE_TTL_S, show_spinner=False)
def cost_by_pool(path: str, start: int, end: int, pools: tuple[str, ...]) -> pl.DataFrame:
    """Money per pool, busy and idle, and per million tokens."""
    reg = registry(path)
    if reg is None:
        return pl.DataFrame()
    return _run(path, lambda c: cost.cost_by_pool(c, reg, Window(start, end, pools), list(pools)))


@st.cache_data(ttl=CACHE_TTL_S, show_spinner=False)
def routing_mix(path: str, start: int, end: int, pools: tuple[str, ...], step: int) -> pl.DataFrame:
    """Requests per bucket and serving pool."""
    return _run(path, lambda c: cost.routing_mix(c, Window(start, end, pools), step))


@st.cache_data(ttl=CACHE_TTL_S, show_spinner=False)
def metric_names(path: str, start: int, end: int, pools: tuple[str, ...]) -> list[str]:
    """Canonical metrics present in the window."""
    return _run(path, lambda c: export.metrics_in(c, Window(start, end, pools)))


@st.cache_data(ttl=CACHE_TTL_S, show_spinner=False)
def export_count(path: str, start: int, end: int, pools: tuple[str, ...], metrics: tuple[str, ...],
                 resolution: str) -> tuple[int, str]:
    """How many rows an export of this selection holds, and the resolution 'auto' picked."""
    return _run(path, lambda c: export.count_rows(c, Window(start, end, pools), list(metrics), resolution))


@st.cache_data(ttl=CACHE_TTL_S, show_spinner=False)
def export_preview(path: str, start: int, end: int, pools: tuple[str, ...], metrics: tuple[str, ...],
                   resolution: str) -> pl.DataFrame:
    """The first rows of an export of this selection."""
    return _run(path, lambda c: export.preview(c, Window(start, end, pools), list(metrics), resolution))


def export_bytes(path: str, start: int, end: int, pools: tuple[str, ...], metrics: tuple[str, ...],
                 fmt: str, resolution: str) -> bytes:
    """The export file itself (not cached: it is built when the download is clicked)."""
    return _run(path, lambda c: export.export_bytes(c, Window(start, end, pools), list(metrics), fmt, resolution))
