"""Independent reference computations for tests: what a view should return, from raw samples and by hand."""

from __future__ import annotations

import duckdb
import polars as pl

from store.views.counters import histogram_quantile, le_value


def raw_increase(con: duckdb.DuckDBPyConnection, metric: str, start_ms: int, end_ms: int,
                 pool: str | None = None, attribute_filter: str = "") -> pl.DataFrame:
    """Per series: the rise of a cumulative metric over samples in [start, end), from raw samples.

    The newest sample before start is the baseline; a drop is a restart and counts its value; a series first
    seen in the window counts from zero (Prometheus' increase, without extrapolation).
    """
    where = " AND pool = ?" if pool is not None else ""
    params: list[object] = [metric, end_ms, *([pool] if pool is not None else [])]
    return con.sql(
        "WITH s AS (SELECT pool, node, device, attributes, ts, value, lag(value) OVER "
        "(PARTITION BY pool, node, device, attributes ORDER BY ts) AS prev FROM samples "
        f"WHERE metric = ? AND ts < ?{where}{attribute_filter}) "
        "SELECT pool, node, device, attributes, sum(CASE WHEN prev IS NULL OR value < prev THEN value "
        "ELSE value - prev END) AS increase FROM s WHERE ts >= ? GROUP BY ALL ORDER BY ALL",
        params=[*params, start_ms]).pl()


def raw_quantile(con: duckdb.DuckDBPyConnection, metric: str, start_ms: int, end_ms: int, q: float,
                 pool: str | None = None) -> float | None:
    """Quantile q of a canonical histogram over [start, end), from the raw bucket samples."""
    inc = raw_increase(con, metric, start_ms, end_ms, pool,
                       " AND json_extract_string(attributes, '$.le') IS NOT NULL")
    if inc.height == 0:
        return None
    per = (inc.with_columns(pl.col("attributes").str.json_path_match("$.le").map_elements(
        le_value, return_dtype=pl.Float64).alias("bound")).group_by("bound").agg(pl.col("increase").sum())
        .sort("bound"))
    return histogram_quantile(per["bound"].to_list(), per["increase"].to_list(), q)
