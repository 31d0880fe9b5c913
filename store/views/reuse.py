"""Observed prefix reuse: each pool's serving engines' prefix-cache hit ratio over a window, to set beside the reuse a
replay of the same traffic gives (the Replay page)."""

from __future__ import annotations

import duckdb
import polars as pl

from canonical.metrics import PREFIX_CACHE_HIT
from store.views.window import Window, frame, pool_filter


def observed_reuse(con: duckdb.DuckDBPyConnection, w: Window) -> pl.DataFrame:
    """Per pool (pool, observed_reuse, series): the mean over the window of its engines' hit ratios, each engine's
    samples averaged first so that one scraped more often does not weigh more."""
    pools, params = pool_filter(w)
    return frame(con, f"""
        SELECT pool, avg(r) AS observed_reuse, count(*) AS series FROM (
            SELECT pool, node, attributes, avg(value) AS r FROM samples
            WHERE metric = ? AND ts >= ? AND ts < ?{pools}
            GROUP BY pool, node, attributes)
        GROUP BY pool ORDER BY pool""", [PREFIX_CACHE_HIT, w.start_ms, w.end_ms, *params])
