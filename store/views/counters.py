"""Counters over a window: Prometheus `increase` per series and bucket, and histogram quantiles from `le` buckets."""

from __future__ import annotations

import duckdb
import numpy as np
import polars as pl

from canonical.timeunits import HOUR_MS
from store.views.window import Window, frame, pool_filter, rollup_source, table_for


def le_value(le: str) -> float:
    """A histogram bound as written in an `le` label ('+Inf' included)."""
    return float("inf") if le.strip() in ("+Inf", "Inf", "inf") else float(le)


def histogram_quantile(bounds: list[float], cumulative: list[float], q: float) -> float | None:
    """Prometheus histogram_quantile over cumulative bucket counts sorted by bound (the last is +Inf).

    Linear interpolation inside the bucket that holds rank q * total; the first bucket starts at 0;
    a rank that lands in the +Inf bucket returns the largest finite bound. None when nothing was counted.
    """
    if not bounds or not cumulative or cumulative[-1] <= 0:
        return None
    b = np.asarray(bounds, dtype=float)
    c = np.maximum.accumulate(np.asarray(cumulative, dtype=float))  # guard against non-monotone input
    rank = q * c[-1]
    i = int(np.searchsorted(c, rank, side="left"))
    i = min(i, len(b) - 1)
    if np.isinf(b[i]):
        finite = b[np.isfinite(b)]
        return float(finite[-1]) if finite.size else None
    lo_b = b[i - 1] if i > 0 else 0.0
    lo_c = c[i - 1] if i > 0 else 0.0
    if c[i] == lo_c:
        return float(b[i])
    return float(lo_b + (b[i] - lo_b) * (rank - lo_c) / (c[i] - lo_c))


def counter_increments(con: duckdb.DuckDBPyConnection, w: Window, metric: str, step_ms: int | None = None,
                       extra: str = "") -> pl.DataFrame:
    """Increase of every series of a counter inside the window, per pool, attributes and step bucket.

    Prometheus `increase` semantics over bucket-end values, as Prometheus computes them from raw
    samples: each bucket adds its last value minus the previous bucket's, the series' last value before the
    window being the baseline; a bucket whose minimum is below that is a reset and adds its last value (a
    rise before the reset inside the same bucket is the one thing a rollup cannot see); a series first seen
    inside the window counts from zero. Columns: pool, attributes, t (step bucket start, or the window
    start), inc.

    The baseline is read from the hourly rollup up to the hour that holds the window start, and from the
    window's own table in that hour: the same last value, without reading the whole history minute by minute.
    """
    table, _ = table_for(w, step_ms)
    src = rollup_source(table)
    pools, pool_params = pool_filter(w)
    step = f"bucket - bucket % {int(step_ms)}" if step_ms else str(int(w.start_ms))
    hour = w.start_ms - w.start_ms % HOUR_MS
    sql = f"""
        WITH s AS (
            SELECT pool, node, device, attributes, bucket, min, last FROM {src}
            WHERE metric = ? AND bucket >= ? AND bucket < ?{pools}{extra}
            UNION ALL
            SELECT pool, node, device, attributes, ? - 1 AS bucket, NULL, arg_max(last, last_ts) AS last FROM (
                SELECT pool, node, device, attributes, last, last_ts FROM rollup_1h
                WHERE metric = ? AND bucket < ?{pools}{extra}
                UNION ALL
                SELECT pool, node, device, attributes, last, last_ts FROM {src}
                WHERE metric = ? AND bucket >= ? AND bucket < ?{pools}{extra})
            GROUP BY pool, node, device, attributes
        ), k AS (  -- a number per series: the window sorts integers, not four strings, JSON among them
            SELECT pool, node, device, attributes, row_number() OVER () AS series
            FROM (SELECT DISTINCT pool, node, device, attributes FROM s)
        ), d AS (
            SELECT pool, attributes, bucket, min, last, lag(last) OVER (PARTITION BY series ORDER BY bucket) AS prev
            FROM s JOIN k USING (pool, node, device, attributes)
        )
        SELECT pool, attributes, {step} AS t,
               sum(CASE WHEN prev IS NULL OR min < prev THEN last ELSE last - prev END) AS inc
        FROM d WHERE bucket >= ? GROUP BY ALL ORDER BY pool, t, attributes"""
    return frame(con, sql, [metric, w.start_ms, w.end_ms, *pool_params, w.start_ms, metric, hour, *pool_params,
                            metric, hour, w.start_ms, *pool_params, w.start_ms])


def histogram_quantiles(con: duckdb.DuckDBPyConnection, w: Window, metric: str, q: float,
                        step_ms: int | None = None) -> pl.DataFrame:
    """Quantile q of a canonical histogram per pool (and step bucket) from its `le` bucket counters.

    Columns: pool, t, value (None when the window holds no observation).
    """
    inc = counter_increments(con, w, metric, step_ms,
                             extra=" AND json_extract_string(attributes, '$.le') IS NOT NULL")
    if inc.is_empty():
        return pl.DataFrame(schema={"pool": pl.String, "t": pl.Int64, "value": pl.Float64})
    # a day holds a few hundred distinct label sets in a hundred thousand rows: parse each set once
    sets = inc.select(pl.col("attributes").unique())
    les = sets.with_columns(pl.col("attributes").str.json_path_match("$.le").alias("le"))
    bounds = dict(zip(les["attributes"].to_list(), (le_value(le) for le in les["le"].to_list()), strict=True))
    per_le = (inc.with_columns(pl.col("attributes").replace_strict(bounds, return_dtype=pl.Float64).alias("bound"))
              .group_by("pool", "t", "bound").agg(pl.col("inc").sum()))
    return bucket_quantiles(per_le, q).sort("pool", "t")


def bucket_quantiles(per_le: pl.DataFrame, q: float, by: tuple[str, ...] = ("pool", "t")) -> pl.DataFrame:
    """histogram_quantile of every group of `by` at once, from rows (*by, bound, inc): columns *by, value."""
    k = list(by)
    g = per_le.sort(*k, "bound").with_columns(pl.col("inc").cum_max().over(k).alias("c"))
    g = g.with_columns(
        (q * pl.col("c").max().over(k)).alias("rank"), pl.col("inc").last().over(k).alias("raw_last"),
        pl.col("bound").shift(1).over(k).fill_null(0.0).alias("lo_b"),
        pl.col("c").shift(1).over(k).fill_null(0.0).alias("lo_c"),
        pl.col("bound").filter(pl.col("bound").is_finite()).max().over(k).alias("finite_max"),
        (pl.int_range(pl.len()).over(k) == pl.len().over(k) - 1).alias("last"))
    # the bucket that holds the rank: the first whose running count reaches it (else the last)
    hit = g.filter((pl.col("c") >= pl.col("rank")) | pl.col("last")).group_by(k, maintain_order=True).first()
    value = (pl.when(pl.col("raw_last") <= 0).then(None)
             .when(pl.col("bound").is_infinite()).then(pl.col("finite_max"))
             .when(pl.col("c") == pl.col("lo_c")).then(pl.col("bound"))
             .otherwise(pl.col("lo_b") + (pl.col("bound") - pl.col("lo_b")) * (pl.col("rank") - pl.col("lo_c"))
                        / (pl.col("c") - pl.col("lo_c"))))
    return hit.select(*k, value.cast(pl.Float64).alias("value"))
