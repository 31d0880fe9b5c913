"""Version matrix: per pool and component, the declared version against the versions nodes reported in a window."""

from __future__ import annotations

from dataclasses import dataclass

import duckdb
import polars as pl

from pool_registry import Registry, version_key
from pool_registry.components import GROUPS, group_of
from store.views.window import Window, frame, pool_filter

OBSERVED_SCHEMA = {"pool": pl.String, "node": pl.String, "component": pl.String, "version": pl.String,
                   "devices": pl.Int64, "first_seen": pl.Int64, "last_seen": pl.Int64}


@dataclass(frozen=True)
class NodeVersion:
    """A node that reported a version other than the reference one, with when."""

    node: str
    version: str
    devices: int
    first_seen: int
    last_seen: int


@dataclass(frozen=True)
class Cell:
    """One pool and component: declared version, (version, nodes) as each node last reported it in the window (so
    the counts add up to the nodes that reported), the nodes that changed version in the window, and drift."""

    pool: str
    component: str
    declared: str | None
    observed: tuple[tuple[str, int], ...]
    drift: bool
    reason: str = ""
    nodes: tuple[NodeVersion, ...] = ()  # the drifted nodes, for click-through
    changed: int = 0  # nodes that reported another version earlier in the window

    @property
    def group(self) -> str:
        """The matrix column of the component."""
        return group_of(self.component)

    def text(self) -> str:
        """'550.144.03 (2 nodes)', or with drift 'declared 6.10.5; seen 6.10.5 (2 nodes), 6.12.12 (1 node)', and
        '; 1 node changed version in the window' where one did."""
        seen = ", ".join(f"{v} ({n} node{'s' if n != 1 else ''})" for v, n in self.observed) or "not reported"
        if self.changed:
            seen += f"; {self.changed} node{'s' if self.changed != 1 else ''} changed version in the window"
        if self.declared is None:
            return f"{self.component}: {seen}"
        if not self.drift and self.observed:
            return f"{self.component}: {seen}"
        return f"{self.component}: declared {self.declared}; seen {seen}"


def observed_in_window(con: duckdb.DuckDBPyConnection, w: Window) -> pl.DataFrame:
    """Per pool, node, component and version reported at some time in the window: devices, first and last seen.

    The versions table keeps only first and last sighting, so a version counts when that span meets the window.
    """
    pools, params = pool_filter(w)
    return frame(con, f"""
        SELECT pool, node, component, version, count(*) AS devices, min(first_seen) AS first_seen,
               max(last_seen) AS last_seen
        FROM versions WHERE first_seen < ? AND last_seen >= ?{pools}
        GROUP BY pool, node, component, version ORDER BY pool, node, component, version""",
                 [w.end_ms, w.start_ms, *params]).select([pl.col(c).cast(t) for c, t in OBSERVED_SCHEMA.items()])


def version_matrix(con: duckdb.DuckDBPyConnection, reg: Registry, w: Window) -> tuple[Cell, ...]:
    """Every declared or observed component of the pools in view, in registry order then column order."""
    return cells_from(observed_in_window(con, w), reg, w.pools or tuple(p.id for p in reg.pools))


def cells_from(observed: pl.DataFrame, reg: Registry, pools: tuple[str, ...]) -> tuple[Cell, ...]:
    """The matrix cells of observed versions (OBSERVED_SCHEMA rows) against the registry's declared stacks."""
    out = []
    for pool in reg.pools:
        if pool.id not in pools:
            continue
        mine = observed.filter(pl.col("pool") == pool.id)
        components = set(pool.stack) | set(mine["component"].to_list())
        for component in sorted(components, key=lambda c: (GROUPS.index(group_of(c)), c)):
            out.append(_cell(pool.id, component, pool.stack.get(component),
                             mine.filter(pl.col("component") == component)))
    return tuple(out)


def _cell(pool: str, component: str, declared: str | None, rows: pl.DataFrame) -> Cell:
    # each node counted once, at the version it reported last: a node upgraded in the window is one node
    newest = rows.sort("last_seen", "first_seen").group_by("node").agg(pl.col("version").last())
    counts = newest.group_by("version").agg(pl.len().alias("nodes")).rows()
    observed = tuple(sorted(((str(v), int(n)) for v, n in counts), key=lambda vn: (-vn[1], version_key(vn[0]))))
    if not observed:
        return Cell(pool, component, declared, (), drift=False)
    changed = rows.group_by("node").agg(pl.col("version").n_unique()).filter(pl.col("version") > 1).height
    seen = rows["version"].unique().to_list()  # every version of the window, the ones nodes left included
    # Without a declared version the version most nodes run is the reference the others drift from.
    reference = declared if declared is not None else observed[0][0]
    off = [r for r in rows.sort("node", "first_seen").iter_rows(named=True) if r["version"] != reference]
    nodes = tuple(NodeVersion(r["node"], r["version"], r["devices"], r["first_seen"], r["last_seen"]) for r in off)
    if len(seen) > 1:
        reason = f"{len(seen)} versions in the pool"
    elif declared is not None and observed[0][0] != declared:
        reason = f"observed {observed[0][0]}, declared {declared}"
    else:
        return Cell(pool, component, declared, observed, drift=False, changed=changed)
    if declared is not None and declared not in seen:
        reason += f"; no node runs the declared {declared}"
    return Cell(pool, component, declared, observed, drift=True, reason=reason, nodes=nodes, changed=changed)
