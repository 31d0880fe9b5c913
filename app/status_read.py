"""Read what the status rules judge, in one short read, for the CLI, the console and `hetpool serve` alike."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import duckdb

from canonical.timeunits import DAY_MS, HOUR_MS
from pool_registry import Registry
from status.evaluate import Facts, Status, evaluate
from status.rules import StatusRules
from store import Access, require_registry
from store.views.health import pool_tiles
from store.views.status import collector_freshness, device_facts
from store.views.window import Window, data_span


def read_facts(con: duckdb.DuckDBPyConnection, w: Window, pools: list[str], now_ms: int) -> Facts:
    """Device states, pool tiles and collector freshness of a window."""
    devices = device_facts(con, w)  # holds each device's throttling, which the tiles then need not read again
    return Facts(devices=devices, tiles=pool_tiles(con, w, pools, throttling=devices),
                 collectors=collector_freshness(con), now_ms=now_ms)


def default_window(con: duckdb.DuckDBPyConnection, since_ms: int = DAY_MS) -> Window:
    """The console's default view: the last `since_ms` up to the end of the hour holding the newest sample."""
    span = data_span(con)
    newest = span[1] if span else int(time.time() * 1000)
    end = newest - newest % HOUR_MS + HOUR_MS
    return Window(end - since_ms, end, ())


@dataclass(frozen=True)
class Judged:
    """The statuses of the default window, with the registry and window they were judged on."""

    registry: Registry
    window: Window
    statuses: tuple[Status, ...]


def judge(store: Access, rules: StatusRules, clock: Callable[[], float] = time.time) -> Judged:
    """The status rules on the console's default window, read in one short read (what `hetpool alerts` prints)."""
    now_ms = int(clock() * 1000)
    with store.read() as con:
        reg = require_registry(con)
        pools = [p.id for p in reg.pools]
        w = default_window(con)
        facts = read_facts(con, w, pools, now_ms)
    return Judged(reg, w, evaluate(reg, rules, facts))
