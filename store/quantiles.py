"""Counter increases and histogram quantiles over a window, from stored cumulative samples.

Counters and histogram buckets are stored cumulative, as exporters expose them. The increase of a series over
(start, end] is the sum of its rises between consecutive samples; a drop is a counter reset (the exporter
restarted) and the value after it counts from zero, as Prometheus treats resets. The sample just before the
window is the baseline; a series first seen inside the window counts from zero.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import duckdb
import polars as pl

from store.errors import StoreError

QUANTILES = (0.5, 0.95, 0.99)


def _filters(pool: str | None, match: Mapping[str, str] | None) -> tuple[str, list[object]]:
    parts: list[str] = []
    params: list[object] = []
    if pool is not None:
        parts.append("pool = ?")
        params.append(pool)
    for key, value in (match or {}).items():
        parts.append("json_extract_string(attributes, ?) = ?")
        params.extend([f"$.{key}", value])
    return "".join(f" AND {p}" for p in parts), params


def increase(con: duckdb.DuckDBPyConnection, metric: str, start_ms: int, end_ms: int, *, pool: str | None = None,
             match: Mapping[str, str] | None = None) -> pl.DataFrame:
    """Per series (pool, node, device, attributes): how much a cumulative metric rose in (start, end]."""
    if end_ms <= start_ms:
        raise StoreError(f"empty window: end {end_ms} is not after start {start_ms}")
    extra, params = _filters(pool, match)
    return con.sql(
        "WITH s AS (SELECT pool, node, device, attributes, ts, value, lag(value) OVER "
        "(PARTITION BY pool, node, device, attributes ORDER BY ts) AS prev FROM samples "
        f"WHERE metric = ? AND ts <= ?{extra}) "
        "SELECT pool, node, device, attributes, sum(CASE WHEN prev IS NULL OR value < prev THEN value "
        "ELSE value - prev END) AS increase FROM s WHERE ts > ? GROUP BY ALL ORDER BY ALL",
        params=[metric, end_ms, *params, start_ms]).pl()


def bucket_quantile(q: float, buckets: Sequence[tuple[float, float]]) -> float | None:
    """Prometheus' histogram_quantile on (upper bound, cumulative count) pairs; None without data.

    Linear interpolation inside the bucket that holds the rank; the first bucket starts at 0; a rank in the
    +Inf bucket gives the largest finite bound.
    """
    if not buckets or not 0 <= q <= 1:
        return None
    ordered = sorted(buckets)
    if not math.isinf(ordered[-1][0]):
        return None
    counts, best = [], 0.0
    for _, c in ordered:
        best = max(best, c)  # repair non-monotonic counts the way Prometheus does
        counts.append(best)
    total = counts[-1]
    if total <= 0:
        return None
    rank = q * total
    i = next(i for i, c in enumerate(counts) if c >= rank)
    if math.isinf(ordered[i][0]):
        return ordered[i - 1][0] if i > 0 else None
    upper = ordered[i][0]
    lower = ordered[i - 1][0] if i > 0 else 0.0
    if i == 0 and upper <= 0:
        return upper
    below = counts[i - 1] if i > 0 else 0.0
    inside = counts[i] - below
    return upper if inside <= 0 else lower + (upper - lower) * (rank - below) / inside


def histogram_buckets(con: duckdb.DuckDBPyConnection, metric: str, start_ms: int, end_ms: int, *,
                      pool: str | None = None, match: Mapping[str, str] | None = None) -> list[tuple[float, float]]:
    """(upper bound, observations in the window) per bucket bound, summed over every matching series."""
    inc = increase(con, metric, start_ms, end_ms, pool=pool, match={**(match or {}), "stat": "bucket"})
    if inc.height == 0:
        return []
    summed = inc.with_columns(
        le=pl.col("attributes").str.json_path_match("$.le")).group_by("le").agg(pl.col("increase").sum())
    return [(float(le), float(n)) for le, n in summed.iter_rows()]


def histogram_quantiles(con: duckdb.DuckDBPyConnection, metric: str, start_ms: int, end_ms: int, *,
                        pool: str | None = None, match: Mapping[str, str] | None = None,
                        quantiles: Sequence[float] = QUANTILES) -> dict[float, float | None]:
    """p50/p95/p99 (or any quantiles) of a canonical histogram metric over (start, end]."""
    buckets = histogram_buckets(con, metric, start_ms, end_ms, pool=pool, match=match)
    return {q: bucket_quantile(q, buckets) for q in quantiles}
