"""All console data access: one cached read-only connection, a cursor per query, cached results."""

from __future__ import annotations

import os

import duckdb
import polars as pl
import streamlit as st

from store import ENV_DB, connect, queries, resolve_db_path

CACHE_TTL_S = 60


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


def cursor() -> duckdb.DuckDBPyConnection:
    """A fresh cursor on the shared read-only connection."""
    return _connection(db_path()).cursor()


@st.cache_data(ttl=CACHE_TTL_S, show_spinner=False)
def fleet_overview(path: str) -> pl.DataFrame:
    """Pools of the newest registry (path is part of the cache key)."""
    cur = _connection(path).cursor()
    try:
        return queries.fleet_overview(cur)
    finally:
        cur.close()


@st.cache_data(ttl=CACHE_TTL_S, show_spinner=False)
def table_counts(path: str) -> dict[str, int]:
    """Row counts of the main tables."""
    cur = _connection(path).cursor()
    try:
        return queries.table_counts(cur)
    finally:
        cur.close()
