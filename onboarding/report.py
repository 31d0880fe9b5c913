"""Tracking pools straight from the store: the one entry point the CLI and the console share."""

from __future__ import annotations

import time

import duckdb

from onboarding.facts import read_facts_of
from onboarding.tracker import Track, track
from pool_registry import Registry
from store.views.window import data_span


def now_ms(con: duckdb.DuckDBPyConnection) -> int:
    """The newest sample's time, so a stored demo reads the same later; the wall clock on an empty store."""
    span = data_span(con)
    return span[1] if span else int(time.time() * 1000)


def tracks(con: duckdb.DuckDBPyConnection, reg: Registry, pools: tuple[str, ...]) -> tuple[Track, ...]:
    """Track each pool on one connection, all as of the same moment."""
    now = now_ms(con)
    facts = read_facts_of(con, pools)  # a few queries for all of them, not a few per pool
    return tuple(track(reg, p, facts[p], now) for p in pools)
