"""Read what the status rules judge, in one short read, for the CLI and the console alike."""

from __future__ import annotations

import duckdb

from status.evaluate import Facts
from store.views.health import pool_tiles
from store.views.status import collector_freshness, device_facts
from store.views.window import Window


def read_facts(con: duckdb.DuckDBPyConnection, w: Window, pools: list[str], now_ms: int) -> Facts:
    """Device states, pool tiles and collector freshness of a window."""
    return Facts(devices=device_facts(con, w), tiles=pool_tiles(con, w, pools),
                 collectors=collector_freshness(con), now_ms=now_ms)
