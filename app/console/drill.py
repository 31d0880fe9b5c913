"""The Node and Device pages: which node or device the URL names, and everything the store knows about it.

A link to them carries `?node=...&pool=...` (and `&device=...`); the pool tells apart nodes of one name in two
pools, and when the sidebar has rewritten it the node's name alone is looked up among every pool's nodes.
"""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass

import polars as pl
import streamlit as st

from app.console import charts, data, filters, node_data
from app.console.safe import md
from canonical.metrics import METRICS

NODE_PAGE, DEVICE_PAGE = "node", "device"  # the url_path of each page in main.py
PAGE_LINKS = 10  # page links under a table of nodes (they keep the session, a table's links open a new tab)


@dataclass(frozen=True)
class Target:
    """The node, or one of its devices (device None for the node page), in its pool."""

    pool: str
    node: str
    device: str | None = None


def link(pool: str, node: str, device: str | None = None) -> str:
    """A relative URL to the Node page (or, with a device, the Device page), for a LinkColumn."""
    params = {"node": node, "pool": pool, **({"device": device} if device is not None else {})}
    return f"{DEVICE_PAGE if device is not None else NODE_PAGE}?{urllib.parse.urlencode(params)}"


def params(target: Target) -> dict[str, str]:
    """The query parameters of an st.page_link to the target."""
    out = {"node": target.node, "pool": target.pool}
    return out if target.device is None else {**out, "device": target.device}


def wanted(view: filters.View, want_device: bool) -> Target | None:
    """The target the URL names, checked against the devices of registry pools that reported; a picker or an
    st.error otherwise."""
    known = node_data.known_devices(data.db_path(), view.all_pools)
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
        names = ", ".join(sorted(set(scope["node"].to_list()))) or "none"
        where = f"pool {', '.join(pools)}" if pools else "any pool"
        st.error(f"No node named “{node}” has reported in {where}. Known nodes: {names}.")
        return None
    pool = str(mine["pool"][0])
    if want_device:
        devices = sorted(d for d in mine.filter(pl.col("pool") == pool)["device"].to_list() if d)
        if device not in devices:
            st.error(f"Node {node} of pool {pool} has no device “{device or ''}”. "
                     f"Its devices: {', '.join(devices) or 'none'}.")
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


def show(target: Target, view: filters.View) -> None:
    """Draw the target's place in the registry, its metrics, error events and versions for the view's window."""
    path = data.db_path()
    reg = data.registry(path)
    assert reg is not None
    pool = reg.pool(target.pool)
    chip = reg.chip_of(pool)
    st.markdown(f"**{md(target.node)}**{f' · device **{md(target.device)}**' if target.device else ''} · "
                f"pool **{md(pool.id)}** · {md(chip.vendor)} {md(chip.name)} · stage {md(pool.onboarding.stage)}")
    st.caption(view.label())
    if target.device is not None:
        st.page_link(f"screens/{NODE_PAGE}.py", label=f"Node {target.node}",
                     query_params=params(Target(target.pool, target.node)))
    versions = node_data.device_versions(path, target.pool, target.node, target.device)
    st.subheader("Versions")
    declared = pl.DataFrame({"component": list(pool.stack), "declared": list(pool.stack.values())},
                            schema={"component": pl.String, "declared": pl.String})
    table = versions.join(declared, on="component", how="full", coalesce=True).select(
        "component", "declared", "version", "device", pl.from_epoch("first_seen", time_unit="ms"),
        pl.from_epoch("last_seen", time_unit="ms")).sort("component", "first_seen", nulls_last=True)
    st.caption("The pool's declared stack against every version this node reported (device blank: node-wide).")
    st.dataframe(table, hide_index=True, width="stretch")
    st.subheader("Error events")
    events = node_data.device_events(path, view.start_ms, view.end_ms, target.pool, target.node, target.device)
    if events.is_empty():
        st.success("No error events in this window.")
    else:
        st.dataframe(events.select(pl.from_epoch("ts", time_unit="ms").alias("time"), pl.exclude("ts")),
                     hide_index=True, width="stretch", column_config={"count": st.column_config.NumberColumn(
                         format="%d")})
    st.subheader("Metrics")
    series = node_data.device_series(path, view.start_ms, view.end_ms, target.pool, target.node, target.device,
                                     view.step_ms())
    if series.is_empty():
        filters.empty_window("metrics of this node")
        return
    st.caption("Device-wide series; gauges as bucket means, counters and histogram observations as increases "
               "per bucket, error events summed.")
    cols = st.columns(3)
    for i, metric in enumerate(m for m in METRICS if m in set(series["metric"].to_list())):
        with cols[i % 3]:
            spec = METRICS[metric]
            charts.show(charts.lines_by_device(series.filter(pl.col("metric") == metric),
                                               f"{metric} ({spec.unit})", "%" if spec.unit == "ratio" else "~s",
                                               events=spec.kind == "events"))
