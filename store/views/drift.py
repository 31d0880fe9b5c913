"""Software drift: nodes whose newest observed version of a component differs from the pool's declared stack."""

from __future__ import annotations

import duckdb
import polars as pl

from pool_registry import Registry
from store.views.window import Window, frame, in_list

DRIFT_SCHEMA = {"pool": pl.String, "node": pl.String, "component": pl.String, "declared": pl.String,
                "observed": pl.String, "devices": pl.Int64, "last_seen": pl.Int64}


def observed_versions(con: duckdb.DuckDBPyConnection, pools: list[str], w: Window | None = None) -> pl.DataFrame:
    """Per pool, node and component, the version seen last (by any of the node's devices), and on how many devices;
    with a window, only versions seen in it count, so an upgrade after the window's end is not drift in it."""
    if not pools:
        return pl.DataFrame(schema={c: DRIFT_SCHEMA[c] for c in
                                    ("pool", "node", "component", "observed", "devices", "last_seen")})
    return frame(con, f"""
        WITH newest AS (
            SELECT pool, node, device, component, arg_max(version, last_seen) AS version, max(last_seen) AS last_seen
            FROM versions WHERE pool IN ({in_list(pools)}) AND last_seen >= ? AND first_seen < ?
            GROUP BY pool, node, device, component
        )
        SELECT pool, node, component, version AS observed, count(*) AS devices, max(last_seen) AS last_seen
        FROM newest GROUP BY pool, node, component, version ORDER BY pool, node, component, version""",
        [*pools, w.start_ms if w else -(2**62), w.end_ms if w else 2**62])


def version_drift(con: duckdb.DuckDBPyConnection, registry: Registry, pools: list[str],
                  w: Window | None = None) -> pl.DataFrame:
    """Observed versions (in the window, if given) that differ from `stack[component]` of their pool; components
    not declared are skipped."""
    seen = observed_versions(con, pools, w)
    declared = pl.DataFrame(
        [{"pool": p.id, "component": k, "declared": v} for p in registry.pools if p.id in pools
         for k, v in p.stack.items()],
        schema={"pool": pl.String, "component": pl.String, "declared": pl.String})
    out = seen.join(declared, on=["pool", "component"], how="inner").filter(pl.col("observed") != pl.col("declared"))
    return out.select([pl.col(c).cast(t) for c, t in DRIFT_SCHEMA.items()]).sort("pool", "node", "component")
