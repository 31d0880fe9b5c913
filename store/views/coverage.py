"""Metric coverage by exporter version: which canonical metrics each pool's exporter builds deliver, and which
metrics a node stopped reporting when its exporter was upgraded."""

from __future__ import annotations

import itertools

import duckdb
import polars as pl

from canonical.metrics import METRICS
from canonical.timeunits import HOUR_MS
from pool_registry import Registry, version_key
from pool_registry.components import group_of
from store.views.window import Window, frame, pool_filter

UNREPORTED = "(not reported)"
Schema = dict[str, pl.DataType | type[pl.DataType]]
COVERAGE_SCHEMA: Schema = {"pool": pl.String, "exporter": pl.String, "nodes": pl.Int64,
                           "metrics": pl.List(pl.String), "first_seen": pl.Int64, "last_seen": pl.Int64}
VANISHED_SCHEMA: Schema = {"pool": pl.String, "metric": pl.String, "before": pl.String, "after": pl.String,
                           "nodes": pl.List(pl.String), "upgraded_at": pl.Int64}


def _exporter_periods(con: duckdb.DuckDBPyConnection, w: Window) -> pl.DataFrame:
    pools, params = pool_filter(w)
    rows = frame(con, f"""
        SELECT pool, node, component, version, min(first_seen) AS first_seen, max(last_seen) AS last_seen
        FROM versions WHERE first_seen < ? AND last_seen >= ?{pools} GROUP BY ALL""", [w.end_ms, w.start_ms, *params])
    keep = [c for c in rows["component"].unique().to_list() if group_of(c) == "exporter"]
    return rows.filter(pl.col("component").is_in(keep)).select("pool", "node", "version", "first_seen", "last_seen")


def _metric_hours(con: duckdb.DuckDBPyConnection, w: Window) -> pl.DataFrame:
    """Per pool, node, metric and hour of the window, the hour's start and its last sample (hourly rollup)."""
    pools, params = pool_filter(w)
    return frame(con, f"""
        SELECT pool, node, metric, bucket, max(last_ts) AS last_ts FROM rollup_1h
        WHERE bucket >= ? AND bucket < ?{pools} GROUP BY ALL""",
                 [w.start_ms - w.start_ms % HOUR_MS, w.end_ms, *params])


def node_coverage(con: duckdb.DuckDBPyConnection, reg: Registry, w: Window) -> pl.DataFrame:
    """Per pool, node and exporter version, the metrics the node reported while it ran that version.

    A node whose exporter reports no version runs the pool's declared exporter version, else UNREPORTED, over
    the whole window. Hours are the resolution: a metric counts for a version when an hour of it meets the
    version's span (its last sample of the hour at or after the version's first sighting).
    """
    periods = _exporter_periods(con, w)
    hours = _metric_hours(con, w)
    declared = {p.id: next((v for k, v in sorted(p.stack.items()) if group_of(k) == "exporter"), UNREPORTED)
                for p in reg.pools}
    bare = (hours.select("pool", "node").unique().join(periods.select("pool", "node").unique(),
                                                       on=["pool", "node"], how="anti")
            .with_columns(pl.col("pool").replace_strict(declared, default=UNREPORTED).alias("version"),
                          pl.lit(w.start_ms, pl.Int64).alias("first_seen"), pl.lit(w.end_ms - 1, pl.Int64)
                          .alias("last_seen")))
    spans = pl.concat([periods.cast({"first_seen": pl.Int64, "last_seen": pl.Int64}), bare.select(periods.columns)
                       .cast({"first_seen": pl.Int64, "last_seen": pl.Int64})])
    return (spans.join(hours, on=["pool", "node"], how="inner")
            .filter((pl.col("bucket") <= pl.col("last_seen")) & (pl.col("last_ts") >= pl.col("first_seen")))
            .group_by("pool", "node", "version").agg(pl.col("metric").unique().sort().alias("metrics"),
                                                     pl.col("first_seen").first(), pl.col("last_seen").first())
            .sort("pool", "node", "first_seen"))


def exporter_coverage(con: duckdb.DuckDBPyConnection, reg: Registry, w: Window,
                      per_node: pl.DataFrame | None = None) -> pl.DataFrame:
    """Per pool and exporter version: nodes that ran it and every metric any of them delivered meanwhile (from
    node_coverage's rows when given)."""
    per_node = node_coverage(con, reg, w) if per_node is None else per_node
    if per_node.is_empty():
        return pl.DataFrame(schema=COVERAGE_SCHEMA)
    out = (per_node.explode("metrics").group_by("pool", "version")
           .agg(pl.col("node").n_unique().alias("nodes"), pl.col("metrics").unique().sort(),
                pl.col("first_seen").min(), pl.col("last_seen").max())
           .rename({"version": "exporter"}))
    order = {p.id: i for i, p in enumerate(reg.pools)}
    return (out.with_columns(pl.col("pool").replace_strict(order, default=len(order)).alias("_o"))
            .sort("_o", "first_seen").drop("_o").select([pl.col(c).cast(t) for c, t in COVERAGE_SCHEMA.items()]))


def vanished_metrics(con: duckdb.DuckDBPyConnection, reg: Registry, w: Window,
                     per_node: pl.DataFrame | None = None) -> pl.DataFrame:
    """Metrics a node reported under one exporter version and no longer under the next one it ran (from
    node_coverage's rows when given).

    Only nodes that report something after the upgrade count, so a node that went silent is not an upgrade that
    dropped everything; event metrics (error events) are never counted as vanished.
    """
    rows = []
    per_node = node_coverage(con, reg, w) if per_node is None else per_node
    for (pool, node), g in per_node.group_by(["pool", "node"], maintain_order=True):
        runs = sorted(g.iter_rows(named=True), key=lambda r: (r["first_seen"], version_key(r["version"])))
        for before, after in itertools.pairwise(runs):
            if before["version"] == after["version"] or not after["metrics"]:
                continue
            for metric in sorted(set(before["metrics"]) - set(after["metrics"])):
                if metric in METRICS and METRICS[metric].kind == "events":
                    continue  # an event metric has rows only when something happened: its absence is no gap
                rows.append((pool, metric, before["version"], after["version"], node, after["first_seen"]))
    if not rows:
        return pl.DataFrame(schema=VANISHED_SCHEMA)
    return (pl.DataFrame(rows, orient="row", schema=["pool", "metric", "before", "after", "node", "upgraded_at"])
            .group_by("pool", "metric", "before", "after")
            .agg(pl.col("node").unique().sort().alias("nodes"), pl.col("upgraded_at").min())
            .sort("pool", "upgraded_at", "metric").select([pl.col(c).cast(t) for c, t in VANISHED_SCHEMA.items()]))
