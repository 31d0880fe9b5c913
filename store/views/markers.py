"""What the console marks on its time series: severe error events and software version changes.

- a severe event: an `accelerator.errors` event of a severity in SEVERE, summed per step bucket, pool and node,
  with the distinct vendor codes; read from the node-minute rollup `node_events_1m` where the window and step
  are whole minutes and no device is asked for, else from the raw samples;
- a version change: a version of a component first seen on a node (or device) in the window while an older
  version of that component had been seen there before it, stamped with its first sighting.
"""

from __future__ import annotations

import duckdb
import polars as pl

from canonical.metrics import ERRORS_METRIC
from canonical.timeunits import HOUR_MS, MINUTE_MS
from store.fleetrollups import SEVERE
from store.rollups import floor_to
from store.views.window import Window, frame, pool_filter

EVENT_SCHEMA = {"t": pl.Int64, "pool": pl.String, "node": pl.String, "severity": pl.String, "events": pl.Float64,
                "codes": pl.String}
CHANGE_SCHEMA = {"ts": pl.Int64, "pool": pl.String, "node": pl.String, "device": pl.String,
                 "component": pl.String, "previous": pl.String, "version": pl.String}


def _place(node: str | None, device: str | None) -> tuple[str, list[object]]:
    """An extra clause narrowing to one node (and one device with its node-wide rows), and its parameters."""
    if node is None:
        return "", []
    if device is None:
        return " AND node = ?", [node]
    return " AND node = ? AND device IN ('', ?)", [node, device]


def severe_events(con: duckdb.DuckDBPyConnection, w: Window, step_ms: int, node: str | None = None,
                  device: str | None = None) -> pl.DataFrame:
    """Severe error events per step bucket, pool, node and severity: t, pool, node, severity, events, codes."""
    if device is None and w.start_ms % MINUTE_MS == 0 and w.end_ms % MINUTE_MS == 0 and step_ms % MINUTE_MS == 0:
        return events_from_minutes(con, w, step_ms, node)
    return events_from_samples(con, w, step_ms, node, device)


def events_from_minutes(con: duckdb.DuckDBPyConnection, w: Window, step_ms: int,
                        node: str | None = None) -> pl.DataFrame:
    """severe_events from the node-minute rollup, for windows and steps of whole minutes and no device."""
    pools, params = pool_filter(w)
    place, place_params = _place(node, None)
    return frame(con, f"""
        SELECT bucket - bucket % {int(step_ms)} AS t, pool, node, severity, sum(events) AS events,
            string_agg(DISTINCT code, ', ' ORDER BY code) AS codes
        FROM node_events_1m WHERE bucket >= ? AND bucket < ?{pools}{place}
        GROUP BY ALL ORDER BY t, pool, node, severity""",
                 [w.start_ms, w.end_ms, *params, *place_params]).select(
        [pl.col(c).cast(t) for c, t in EVENT_SCHEMA.items()])


def events_from_samples(con: duckdb.DuckDBPyConnection, w: Window, step_ms: int, node: str | None = None,
                        device: str | None = None) -> pl.DataFrame:
    """severe_events from the raw samples, for any window, step and place (a device keeps its node-wide rows)."""
    pools, params = pool_filter(w)
    place, place_params = _place(node, device)
    severities = ", ".join("?" * len(SEVERE))
    severe = f"json_extract_string(attributes, '$.severity') IN ({severities})"
    # raw samples only of the hours whose hourly rollup holds a severe event: a fleet's day of samples is
    # hundreds of millions of rows, its severe hours a handful
    hours = con.execute(f"""
        SELECT DISTINCT bucket FROM rollup_1h
        WHERE metric = ? AND bucket >= ? AND bucket < ? AND max > 0 AND {severe}{pools}{place} ORDER BY bucket""",
                        [ERRORS_METRIC, floor_to(w.start_ms, HOUR_MS), w.end_ms, *SEVERE, *params,
                         *place_params]).fetchall()
    spans = _spans([int(h) for (h,) in hours], w)
    if not spans:
        return pl.DataFrame(schema=EVENT_SCHEMA)
    within = " OR ".join("(ts >= ? AND ts < ?)" for _ in spans)
    return frame(con, f"""
        SELECT ts - ts % {int(step_ms)} AS t, pool, node, json_extract_string(attributes, '$.severity') AS severity,
            sum(value) AS events,
            string_agg(DISTINCT coalesce(json_extract_string(attributes, '$.code'), ''), ', '
                       ORDER BY coalesce(json_extract_string(attributes, '$.code'), '')) AS codes
        FROM samples
        WHERE metric = ? AND ({within}) AND {severe} AND value > 0{pools}{place}
        GROUP BY ALL ORDER BY t, pool, node, severity""",
                 [ERRORS_METRIC, *(b for span in spans for b in span), *SEVERE, *params, *place_params]).select(
        [pl.col(c).cast(t) for c, t in EVENT_SCHEMA.items()])


def _spans(hours: list[int], w: Window) -> list[tuple[int, int]]:
    """Sorted hour starts as runs of consecutive hours, each [start, end) clipped to the window."""
    spans: list[tuple[int, int]] = []
    for h in hours:
        if spans and spans[-1][1] == h:
            spans[-1] = (spans[-1][0], h + HOUR_MS)
        else:
            spans.append((h, h + HOUR_MS))
    return [(max(a, w.start_ms), min(b, w.end_ms)) for a, b in spans]


def version_changes(con: duckdb.DuckDBPyConnection, w: Window, node: str | None = None,
                    device: str | None = None) -> pl.DataFrame:
    """Version changes in the window, oldest first: ts, pool, node, device, component, previous, version."""
    pools, params = pool_filter(w)
    place, place_params = _place(node, device)
    return frame(con, f"""
        WITH v AS (
            SELECT pool, node, device, component, version, first_seen,
                lag(version) OVER (PARTITION BY pool, node, device, component ORDER BY first_seen) AS previous
            FROM versions WHERE first_seen < ?{pools}{place}
        )
        SELECT first_seen AS ts, pool, node, device, component, previous, version FROM v
        WHERE previous IS NOT NULL AND previous <> version AND first_seen >= ?
        ORDER BY ts, pool, node, device, component""",
                 [w.end_ms, *params, *place_params, w.start_ms]).select(
        [pl.col(c).cast(t) for c, t in CHANGE_SCHEMA.items()])
