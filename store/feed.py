"""The newest value of every series still fresh, for the scrape endpoint."""

from __future__ import annotations

import json
from dataclasses import dataclass

import duckdb

from canonical.metrics import METRICS
from store.snapshots import latest_registry


@dataclass(frozen=True)
class Latest:
    """One series' newest sample, with the vendor of its pool's chip."""

    pool: str
    node: str
    device: str
    vendor: str
    metric: str
    attributes: dict[str, str]
    ts: int
    value: float


def pool_vendors(con: duckdb.DuckDBPyConnection) -> dict[str, str]:
    """Pool id -> vendor of its chip, from the newest registry ({} when none is loaded)."""
    snap = latest_registry(con)
    if snap is None:
        return {}
    return {p.id: snap.registry.chip_of(p).vendor for p in snap.registry.pools}


def latest_values(con: duckdb.DuckDBPyConnection, window_ms: int, kinds: tuple[str, ...]) -> list[Latest]:
    """Per series, the newest sample no older than `window_ms` before the newest sample of all.

    The window is anchored on the data, not the clock, so a store fed in batches or replayed still serves
    its newest state; a series that stopped reporting before the window drops out of the feed.
    """
    return latest_values_capped(con, window_ms, kinds, None)[0]


def latest_values_capped(con: duckdb.DuckDBPyConnection, window_ms: int, kinds: tuple[str, ...],
                         limit: int | None) -> tuple[list[Latest], int]:
    """latest_values for at most `limit` series (in metric, pool, node, device order), and how many there were."""
    metrics = sorted(m.name for m in METRICS.values() if m.kind in kinds)
    if not metrics:
        return [], 0
    marks = ", ".join("?" for _ in metrics)
    rows = con.execute(
        f"""
        SELECT pool, node, device, metric, attributes, max(ts) AS ts, arg_max(value, ts) AS value,
               count(*) OVER () AS total
        FROM samples
        WHERE metric IN ({marks}) AND ts >= (SELECT max(ts) FROM samples WHERE metric IN ({marks})) - ?
        GROUP BY pool, node, device, metric, attributes
        ORDER BY metric, pool, node, device, attributes
        LIMIT ?
        """,  # the placeholders above are only '?' marks, one per metric
        [*metrics, *metrics, window_ms, limit if limit is not None else 2**62],
    ).fetchall()
    vendors = pool_vendors(con)
    total = int(rows[0][7]) if rows else 0
    return [Latest(pool, node, device, vendors.get(pool, ""), metric, _attributes(attrs), int(ts), float(value))
            for pool, node, device, metric, attrs, ts, value, _ in rows], total


def _attributes(text: str) -> dict[str, str]:
    """The stored JSON object of a series' attributes as strings."""
    try:
        data = json.loads(text or "{}")
    except ValueError:
        return {}
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}
