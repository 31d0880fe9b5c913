"""Which node or device a Node or Device page's URL names, a picker when it names none, and the links to them.

A link to them carries `?node=...&pool=...` (and `&device=...`); the pool tells apart nodes of one name in two
pools, and when the sidebar has rewritten it the node's name alone is looked up among every pool's nodes.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl
import streamlit as st

from app.console import cache, filters, node_data
from app.console.safe import md

PAGE_LINKS = 10  # page links under a table of nodes (they keep the session, a table's links open a new tab)


@dataclass(frozen=True)
class Target:
    """The node, or one of its devices (device None for the node page), in its pool."""

    pool: str
    node: str
    device: str | None = None


def params(target: Target) -> dict[str, str]:
    """The query parameters of an st.page_link to the target."""
    out = {"node": target.node, "pool": target.pool}
    return out if target.device is None else {**out, "device": target.device}


def wanted(view: filters.View, want_device: bool) -> Target | None:
    """The target the URL names, checked against the devices of registry pools that reported; a picker or an
    st.error otherwise."""
    known = node_data.known_devices(cache.db_path(), view.all_pools)
    qp = st.query_params
    node, device = qp.get("node"), qp.get("device") if want_device else None
    if not node:
        _picker(known, want_device)
        return None
    pools = [p for p in qp.get_all("pool") if p in set(known["pool"].to_list())]
    mine = known.filter(pl.col("node") == node)
    if pools and mine.filter(pl.col("pool").is_in(pools)).height:
        mine = mine.filter(pl.col("pool").is_in(pools))
    if mine.is_empty():
        scope = known.filter(pl.col("pool").is_in(pools)) if pools else known
        names = ", ".join(md(n) for n in sorted(set(scope["node"].to_list()))) or "none"
        where = f"pool {', '.join(md(p) for p in pools)}" if pools else "any pool"
        st.error(f"No node named “{md(node)}” has reported in {where}. Known nodes: {names}.")
        return None
    pool = str(mine["pool"][0])
    if want_device:
        devices = sorted(d for d in mine.filter(pl.col("pool") == pool)["device"].to_list() if d)
        if device not in devices:
            st.error(f"Node {md(node)} of pool {md(pool)} has no device “{md(device or '')}”. "
                     f"Its devices: {', '.join(md(d) for d in devices) or 'none'}.")
            return None
    return Target(pool, node, device)


def _picker(known: pl.DataFrame, want_device: bool) -> None:
    """Let the user choose a node (or device) when the URL names none; the choice goes into the URL."""
    rows = known.filter(pl.col("device") != "") if want_device else known.unique(["pool", "node"], maintain_order=True)
    options = [Target(r["pool"], r["node"], r["device"] if want_device else None) for r in rows.iter_rows(named=True)]
    what = "device" if want_device else "node"
    chosen = st.selectbox(f"Choose a {what}", options, index=None, key=f"drill_{what}",
                          format_func=lambda t: " · ".join(x for x in (t.pool, t.node, t.device) if x is not None),
                          placeholder=f"pool · node{' · device' if want_device else ''}")
    if chosen is None:
        st.info(f"Pick a {what} above, or open one from the Fleet health or Errors and reliability pages.")
        return
    st.query_params.update(params(chosen))
    st.rerun()
