"""All console data access: short reads of the store, cached per database generation, waits shown on the page.

Every query is a plain function of a read-only connection and plain arguments (the database path first, the
window as numbers). It runs inside one cached function keyed by the query's name, the path, the database's
generation (its file identity and modification times, so a commit or a replaced file is seen at the next
rerun) and the arguments. A read waits at most READ_WAIT_S inside the cache; a longer wait comes back out
here, where the page says what it waits for until the database is free again.
"""

from __future__ import annotations

import functools
import json
import os
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any, TypeVar

import duckdb
import polars as pl
import streamlit as st

from access import Decision, require
from app.status_read import read_facts
from onboarding.files import EvidenceFile, store_files
from pool_registry import Registry
from pool_registry.compat import compatibility
from status.evaluate import Facts
from store import ENV_DB, Store, StoreBusy, StoreError, latest_registry, replay_runs, resolve_db_path
from store import requests as stored
from store.locks import timeout_from_env
from store.views import cost, coverage, drift, export, faults, fleet, health, markers, reliability, runs, versions
from store.views.window import Window, data_span

CACHE_TTL_S = 60
CACHE_ENTRIES = 1024
READ_WAIT_S = 0.8  # inside the cache, where nothing can be shown; longer waits are shown by _read
T = TypeVar("T")
Generation = tuple[int, int, int, int, int] | None
_QUERIES: dict[str, Callable[..., Any]] = {}
_local = threading.local()


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


def generation(path: str) -> Generation:
    """The file's identity and last change (inode, size, mtime of the file and of its write-ahead log)."""
    try:
        st_db = os.stat(path)
    except OSError:
        return None
    try:
        st_wal = os.stat(path + ".wal")
        wal = (st_wal.st_size, st_wal.st_mtime_ns)
    except OSError:
        wal = (0, 0)
    return (st_db.st_ino, st_db.st_size, st_db.st_mtime_ns, *wal)


def show_waits_in(slot: Any) -> None:
    """Where this script run tells the user that the database is busy (an st.empty() of the page)."""
    _local.slot = slot


@st.cache_resource(show_spinner=False)
def _store(path: str) -> Store:
    return Store(path, timeout_s=READ_WAIT_S)


@st.cache_data(ttl=CACHE_TTL_S, max_entries=CACHE_ENTRIES, show_spinner=False)
def _cached(name: str, path: str, gen: Generation, args: tuple[Any, ...]) -> Any:
    with _store(path).read() as con:
        return _QUERIES[name](con, *args)


def _uncached(fn: Callable[..., Any], path: str, args: tuple[Any, ...]) -> Any:
    with _store(path).read() as con:
        return fn(con, *args)


def _read(name: str | Callable[..., Any], path: str, args: tuple[Any, ...]) -> Any:
    """A query (cached when named); while the database is busy, say so on the page and try again."""
    started = time.monotonic()
    limit = timeout_from_env()
    slot = getattr(_local, "slot", None)
    while True:
        try:
            if isinstance(name, str):
                result = _cached(name, path, generation(path), args)
            else:
                result = _uncached(name, path, args)
        except StoreBusy:
            waited = time.monotonic() - started
            if waited >= limit:
                raise StoreBusy(f"the database stayed busy for {waited:.0f} s: {_store(path).gate.busy_with()}; "
                                "the page will try again when you reload it") from None
            if slot is not None:
                slot.info(f"Waiting for the database: {_store(path).gate.busy_with()}. This page goes on as soon "
                          f"as it is free ({waited:.0f} s so far).")
            time.sleep(0.2)
            continue
        if slot is not None and time.monotonic() - started > READ_WAIT_S:
            slot.empty()
        return result


def query(fn: Callable[..., T]) -> Callable[..., T]:
    """Make `fn(con, *args)` a cached console query called as `name(path, *args)`."""
    _QUERIES[fn.__name__] = fn

    @functools.wraps(fn)
    def call(path: str, *args: Any) -> T:
        return _read(fn.__name__, path, args)

    return call


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
    """Stragglers, hot and silent devices."""
    return health.worst_devices(con, Window(start, end, pools))


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
    """Healthy over observed device-hours per pool."""
    return reliability.reliability(con, Window(start, end, pools))


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
    return _read(_export_bytes, path, (start, end, pools, metrics, fmt, resolution))


@query
def ingest_sources(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """What each source stored last, from the ingest runs."""
    return runs.sources(con)


def service_health(url: str, timeout_s: float = 2.0) -> dict[str, Any]:
    """The health report of the `hetpool serve` this console runs under (its endpoint answers 503 when
    unhealthy, with the same body)."""
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as response:
            return dict(json.load(response))
    except urllib.error.HTTPError as exc:
        if exc.code == 503:
            return dict(json.load(exc))
        raise StoreError(f"the health endpoint {url} answered HTTP {exc.code}") from None
    except (OSError, ValueError) as exc:
        raise StoreError(f"cannot read the health endpoint {url}: {exc}") from None


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
    result: tuple[pl.DataFrame, pl.DataFrame] = _read(_stored_window, path, (trace, start, end))
    return result


def _fault_telemetry(con: duckdb.DuckDBPyConnection, first: int | None, last: int | None,
                     days: float) -> pl.DataFrame:
    return faults.telemetry_for(con, first, last, days)


def fault_telemetry(path: str, first: int | None, last: int | None, days: float) -> pl.DataFrame:
    """Each pool's failures and throttling before the replayed traffic, as `hetpool replay run` reads them."""
    result: pl.DataFrame = _read(_fault_telemetry, path, (first, last, days))
    return result


@query
def saved_runs(con: duckdb.DuckDBPyConnection, limit: int = 200) -> pl.DataFrame:
    """Saved replays, newest first."""
    return replay_runs.list_replay_runs(con, limit)


@query
def saved_run(con: duckdb.DuckDBPyConnection, run_id: int) -> dict[str, Any] | None:
    """One saved replay with its JSON decoded, or None."""
    return replay_runs.get_replay_run(con, run_id)


def save_run(path: str, record: dict[str, Any], user: Decision | None) -> int:
    """Save a replay in one short write (the replay itself ran before, holding nothing); returns its run id.
    Refused with AccessDenied, before the store is opened, unless the user is a lead."""
    require(user, "save_replay_run")
    store = Store(path, on_wait=lambda message: _say_waiting(message))
    with store.transaction("hetpool console: save a replay run") as con:
        return replay_runs.save_replay_run(con, **record)


def add_evidence(path: str, files: tuple[EvidenceFile, ...], user: Decision | None) -> int:
    """Store checked onboarding evidence files in one short write; how many were new. Refused with AccessDenied,
    before the store is opened, unless the user is a lead."""
    require(user, "add_evidence")
    store = Store(path, on_wait=lambda message: _say_waiting(message))
    pools = ", ".join(sorted({f.pool for f in files}))
    with store.transaction(f"hetpool console: add onboarding evidence to {pools}") as con:
        return store_files(con, files, "console")


def _say_waiting(message: str) -> None:
    slot = getattr(_local, "slot", None)
    if slot is not None:
        slot.info(message[:1].upper() + message[1:])
