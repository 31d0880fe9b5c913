"""One node or one device: every canonical metric over time, its error events, versions and known peers.

Per-device metrics read only their device-wide series (as every device view does). Each metric is reduced
per step bucket by its kind: a gauge to the mean of its samples, error events to their sum, a counter to
its increase (a drop is a reset and adds the new value), and a histogram to the increase of its `+Inf`
bucket, which counts the observations.
"""

from __future__ import annotations

import duckdb
import polars as pl

from canonical.metrics import ERRORS_METRIC, METRICS
from store.views.window import Window, frame, rollup_source, table_for

SERIES_SCHEMA = {"metric": pl.String, "device": pl.String, "t": pl.Int64, "value": pl.Float64}
EVENT_SCHEMA = {"ts": pl.Int64, "device": pl.String, "code": pl.String, "error_class": pl.String,
                "severity": pl.String, "count": pl.Float64}


def _where(node: str, device: str | None) -> tuple[str, list[object]]:
    """The clause selecting a node (or one of its devices) of a pool, and its parameters."""
    if device is None:
        return "pool = ? AND node = ?", [node]
    return "pool = ? AND node = ? AND device = ?", [node, device]


def metric_series(con: duckdb.DuckDBPyConnection, w: Window, pool: str, node: str, device: str | None,
                  step_ms: int) -> pl.DataFrame:
    """Every canonical metric of the node (or device) per step bucket and device: metric, device, t, value."""
    table, _ = table_for(w, step_ms)
    where, params = _where(node, device)
    per_device = [m for m, c in METRICS.items() if c.per_device]
    rows = frame(con, f"""
        SELECT metric, device, attributes, bucket - bucket % {int(step_ms)} AS t,
               sum(sum) AS sum, sum(count) AS count, min(min) AS min, arg_max(last, bucket) AS last
        FROM {rollup_source(table)}
        WHERE {where} AND bucket >= ? AND bucket < ?
          AND (device_wide OR metric NOT IN ({', '.join('?' * len(per_device))}))
          AND metric IN ({', '.join('?' * len(METRICS))})
        GROUP BY ALL ORDER BY metric, device, attributes, t""",
                 [pool, *params, w.start_ms, w.end_ms, *per_device, *METRICS])
    parts = []
    for metric, part in rows.group_by("metric", maintain_order=True):
        parts.append(_reduce(str(metric[0]), part))
    if not parts:
        return pl.DataFrame(schema=SERIES_SCHEMA)
    return pl.concat(parts).select([pl.col(c).cast(t) for c, t in SERIES_SCHEMA.items()]).sort("metric", "device", "t")


def _reduce(metric: str, part: pl.DataFrame) -> pl.DataFrame:
    """One metric's buckets reduced by its kind (see the module doc), summed over its series per device."""
    kind = METRICS[metric].kind
    if kind == "gauge":
        return part.group_by("metric", "device", "t").agg((pl.col("sum").sum() / pl.col("count").sum()).alias("value"))
    if kind == "events":
        return part.group_by("metric", "device", "t").agg(pl.col("sum").sum().alias("value"))
    if kind == "histogram":
        part = part.filter(pl.col("attributes").str.json_path_match("$.le").is_in(["+Inf", "Inf", "inf"]))
    prev = pl.col("last").shift(1).over("device", "attributes", order_by="t")
    inc = pl.when(prev.is_null() | (pl.col("min") < prev)).then(pl.col("last")).otherwise(pl.col("last") - prev)
    # the first bucket has no baseline in the window: its increase is unknown, not its whole running total
    first = prev.is_null()
    return (part.with_columns(inc.alias("inc"), first.alias("first")).filter(~pl.col("first"))
            .group_by("metric", "device", "t").agg(pl.col("inc").sum().alias("value")))


def error_events(con: duckdb.DuckDBPyConnection, w: Window, pool: str, node: str, device: str | None,
                 limit: int = 500) -> pl.DataFrame:
    """The node's (or device's) error events in the window, newest first: ts, device, code, class, severity, count."""
    where, params = _where(node, device)
    return frame(con, f"""
        SELECT ts, device,
            coalesce(json_extract_string(attributes, '$.code'), '') AS code,
            coalesce(json_extract_string(attributes, '$.error_class'), 'unknown') AS error_class,
            coalesce(json_extract_string(attributes, '$.severity'), 'unknown') AS severity,
            value AS count
        FROM samples WHERE {where} AND metric = ? AND ts >= ? AND ts < ?
        ORDER BY ts DESC, device LIMIT ?""",
                 [pool, *params, ERRORS_METRIC, w.start_ms, w.end_ms, limit]).select(
        [pl.col(c).cast(t) for c, t in EVENT_SCHEMA.items()])


def versions(con: duckdb.DuckDBPyConnection, pool: str, node: str, device: str | None) -> pl.DataFrame:
    """Every version the node reported (for a device: its own and the node-wide ones), oldest sighting first."""
    devices = "" if device is None else " AND device IN ('', ?)"
    return frame(con, f"""
        SELECT device, component, version, first_seen, last_seen FROM versions
        WHERE pool = ? AND node = ?{devices} ORDER BY component, first_seen, device""",
                 [pool, node, *([] if device is None else [device])])


def known_devices(con: duckdb.DuckDBPyConnection, pools: tuple[str, ...]) -> pl.DataFrame:
    """Every node and device that reported in the given pools (all pools when empty): pool, node, device."""
    clause = f" WHERE pool IN ({', '.join('?' * len(pools))})" if pools else ""
    return frame(con, f"SELECT DISTINCT pool, node, device FROM rollup_1h{clause} ORDER BY pool, node, device",
                 list(pools))


def node_devices(con: duckdb.DuckDBPyConnection, pool: str, node: str) -> pl.DataFrame:
    """The node's devices with their first and newest sample (hourly rollup): device, first_seen, last_seen."""
    return frame(con, """
        SELECT device, min(bucket) AS first_seen, max(last_ts) AS last_seen FROM rollup_1h
        WHERE pool = ? AND node = ? AND device <> '' GROUP BY device ORDER BY device""", [pool, node]).select(
        pl.col("device").cast(pl.String), pl.col("first_seen").cast(pl.Int64), pl.col("last_seen").cast(pl.Int64))
