"""What the scrape endpoint serves: the newest value of every fresh series, error totals and versions seen.

Gauges, counters and histogram parts are served as their newest sample no older than the window before the
newest sample of all; error events as one running total per series over everything stored (a counter that
only grows as events are added, and falls only when `prune` drops old ones, which a reader takes for a
restart); versions as the rows of the versions table last seen within the same window.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import duckdb

from canonical.metrics import ERRORS_METRIC, METRICS
from store.snapshots import latest_registry

NEWEST_KINDS = ("gauge", "counter", "histogram")  # the kinds whose newest value the feed serves
_ANY = 2**62  # LIMIT when there is none


@dataclass(frozen=True)
class Latest:
    """One series' newest sample (for error events: their running total), with the vendor of its pool's chip."""

    pool: str
    node: str
    device: str
    vendor: str
    metric: str
    attributes: dict[str, str]
    ts: int
    value: float
    device_wide: bool = True  # false for a series of one part of its device


@dataclass(frozen=True)
class Seen:
    """One software version on a node or device, last seen at `ts` (epoch ms)."""

    pool: str
    node: str
    device: str
    vendor: str
    component: str
    version: str
    ts: int


@dataclass(frozen=True)
class FeedRead:
    """One read for the feed: the series and versions to serve, and how many there were before the cap."""

    rows: list[Latest]
    versions: list[Seen]
    total: int
    as_of: int = 0  # epoch ms of the newest sample of all: when error totals and versions were last known

    @property
    def served(self) -> int:
        """Series served: samples and versions."""
        return len(self.rows) + len(self.versions)


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
    read = feed_read(con, window_ms, limit, kinds, errors=False, versions=False)
    return read.rows, read.total


def feed_read(con: duckdb.DuckDBPyConnection, window_ms: int, limit: int | None,
              kinds: tuple[str, ...] = NEWEST_KINDS, *, errors: bool = True, versions: bool = True) -> FeedRead:
    """The newest values of `kinds`, the error totals and the versions in the window, at most `limit` of them
    all (newest values and error totals in metric, pool, node, device order, then versions), in one query."""
    metrics = sorted(m.name for m in METRICS.values() if m.kind in kinds)
    marks = ", ".join("?" for _ in metrics) or "NULL"
    # the placeholders below are only '?' marks, one per metric
    parts = [f"""
        SELECT 0 AS part, metric, pool, node, device, attributes, max(ts) AS ts, arg_max(value, ts) AS value,
               bool_and(coalesce(device_wide, TRUE)) AS device_wide
        FROM samples
        WHERE metric IN ({marks}) AND ts >= (SELECT since FROM anchor)
        GROUP BY pool, node, device, metric, attributes"""]
    params: list[object] = [window_ms, *metrics, *metrics]  # the anchor's, then the newest values'
    if errors:
        parts.append("""
        SELECT 0, metric, pool, node, device, attributes, max(ts), sum(value), bool_and(coalesce(device_wide, TRUE))
        FROM samples WHERE metric = ?
        GROUP BY pool, node, device, metric, attributes""")
        params.append(ERRORS_METRIC)
    if versions:
        # a version row is served as (component, version) in the metric and attributes columns
        parts.append("""
        SELECT 1, component, pool, node, device, version, last_seen, 1.0, TRUE
        FROM versions WHERE last_seen >= (SELECT since FROM anchor)""")
    rows = con.execute(
        f"""
        WITH anchor AS (
            SELECT coalesce(max(ts), (SELECT max(last_seen) FROM versions)) - ? AS since
            FROM samples WHERE metric IN ({marks}))
        SELECT *, count(*) OVER () AS total, (SELECT since FROM anchor) AS since FROM ({" UNION ALL ".join(parts)})
        ORDER BY part, metric, pool, node, device, attributes
        LIMIT ?
        """,
        [*params, limit if limit is not None else _ANY],
    ).fetchall()
    vendors = pool_vendors(con)
    out, seen = [], []
    for part, metric, pool, node, device, attrs, ts, value, wide, _, _ in rows:
        vendor = vendors.get(pool, "")
        if part:
            seen.append(Seen(pool, node, device, vendor, metric, attrs, int(ts)))
        else:
            out.append(Latest(pool, node, device, vendor, metric, _attributes(attrs), int(ts), float(value),
                              bool(wide)))
    as_of = int(rows[0][-1]) + window_ms if rows and rows[0][-1] is not None else 0
    return FeedRead(out, seen, int(rows[0][-2]) if rows else 0, as_of)


def _attributes(text: str) -> dict[str, str]:
    """The stored JSON object of a series' attributes as strings."""
    try:
        data = json.loads(text or "{}")
    except ValueError:
        return {}
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}
