"""The Node and Device pages: which node or device the URL names, and everything the store knows about it.

A link to them carries `?node=...&pool=...` (and `&device=...`); the pool tells apart nodes of one name in two
pools, and when the sidebar has rewritten it the node's name alone is looked up among every pool's nodes.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl
import streamlit as st

from app.console import charts, data, filters, links, node_data, onboarding_data, timecharts
from app.console.links import NODE_PAGE
from app.console.safe import md
from canonical.metrics import METRICS
from onboarding import Track
from pool_registry import Pool, Registry

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


MISSING = "–"  # a missing value, as everywhere in the console
VERSIONS_TEXT = (f"The pool's declared stack beside every version this node reported. {MISSING} under declared: the "
                 f"registry declares no version of that component; {MISSING} under version and seen: no exporter "
                 "reported it. A blank device: the version is the whole node's.")
SIBLINGS = 12  # sibling nodes named in the registry caption; more are counted


def stage_text(pool: Pool, track: Track | None) -> str:
    """The pool's onboarding stage: the tracker's current one when the pool is being onboarded, else the declared."""
    if track is None:
        return f"stage {md(pool.onboarding.stage)}"
    return (f"onboarding stage **{md(track.stage_title)}** ({track.reached} of {len(track.stages)} stages done; "
            f"declared {md(track.declared)})")


def registry_text(reg: Registry, pool: Pool, target: Target, nodes: list[str]) -> str:
    """Where the node sits in the registry: the pool's declared size and rule, and the pool's other nodes as links."""
    rule = ", ".join([*(f"node {p}" for p in pool.assign.node_patterns),
                      *(f"label {k}={v}" for k, v in pool.assign.labels.items())]) or "no rule"
    others = [n for n in nodes if n != target.node]
    named = ", ".join(links.markdown(pool.id, n) for n in others[:SIBLINGS])
    more = f" and {len(others) - SIBLINGS} more" if len(others) > SIBLINGS else ""
    peers = f"; its other nodes that reported: {named}{more}" if others else "; no other node of it reported"
    return (f"Registry {md(reg.name)}: pool {md(pool.id)} declares {pool.devices} devices, {pool.devices_per_node} "
            f"per node ({pool.nodes} nodes), and takes samples by {md(rule)}{peers}.")


def show(target: Target, view: filters.View) -> None:
    """Draw the target's place in the registry, its metrics, error events and versions for the view's window."""
    path = data.db_path()
    reg = data.registry(path)
    assert reg is not None
    pool = reg.pool(target.pool)
    chip = reg.chip_of(pool)
    track = next((t for t in onboarding_data.onboarding_tracks(path) if t.pool == pool.id), None)
    st.markdown(f"**{md(target.node)}**{f' · device **{md(target.device)}**' if target.device else ''} · "
                f"pool **{md(pool.id)}** · {md(chip.vendor)} {md(chip.name)} · {stage_text(pool, track)}")
    known = node_data.known_devices(path, (pool.id,))
    st.caption(registry_text(reg, pool, target, sorted(set(known["node"].to_list()))))
    st.caption(view.label())
    if target.device is not None:
        # a page link's label renders Markdown (images too): the name is escaped
        st.page_link(f"screens/{NODE_PAGE}.py", label=f"Node {md(target.node)}",
                     query_params=params(Target(target.pool, target.node)))
    else:
        _devices(target)
    _versions(target, pool)
    _events(target, view)
    st.subheader("Metrics")
    series = node_data.device_series(path, view.start_ms, view.end_ms, target.pool, target.node, target.device,
                                     view.step_ms())
    if series.is_empty():
        filters.empty_window("metrics of this node")
        return
    st.caption("Device-wide series; gauges as bucket means, counters and histogram observations as increases "
               "per bucket, error events summed.")
    tl = view.timeline()
    marks = timecharts.Marks(*node_data.device_marks(path, view.start_ms, view.end_ms, target.pool, target.node,
                                                     target.device, view.step_ms()))
    cols = st.columns(3)
    for i, metric in enumerate(m for m in METRICS if m in set(series["metric"].to_list())):
        with cols[i % 3]:
            spec = METRICS[metric]
            charts.show(timecharts.lines_by_device(series.filter(pl.col("metric") == metric),
                                                   f"{metric} ({spec.unit})", tl,
                                                   "%" if spec.unit == "ratio" else "~s",
                                                   events=spec.kind == "events", marks=marks))


def _devices(target: Target) -> None:
    """The node's devices, each a link to its Device page."""
    st.subheader("Devices")
    devices = node_data.node_devices(data.db_path(), target.pool, target.node)
    if devices.is_empty():
        st.info("No device of this node has reported; its samples are node-wide.")
        return
    table, config = links.linked(devices.select("device", pl.from_epoch("first_seen", time_unit="ms"),
                                                pl.from_epoch("last_seen", time_unit="ms")),
                                 target.pool, target.node)
    st.caption("Every device of the node that reported, with its first and newest sample.")
    st.dataframe(table, hide_index=True, width="stretch", column_config={
        **config, "first_seen": st.column_config.DatetimeColumn("first sample (UTC)"),
        "last_seen": st.column_config.DatetimeColumn("newest sample (UTC)")})


def _versions(target: Target, pool: Pool) -> None:
    versions = node_data.device_versions(data.db_path(), target.pool, target.node, target.device)
    st.subheader("Versions")
    declared = pl.DataFrame({"component": list(pool.stack), "declared": list(pool.stack.values())},
                            schema={"component": pl.String, "declared": pl.String})
    joined = versions.join(declared, on="component", how="full", coalesce=True).sort(
        "component", "first_seen", nulls_last=True)
    # as text, so a cell neither declared nor reported reads "–" like every other missing value
    seen = [pl.from_epoch(c, time_unit="ms").dt.strftime("%Y-%m-%d %H:%M:%S").fill_null(MISSING).alias(c)
            for c in ("first_seen", "last_seen")]
    table, config = links.linked(joined.select(
        "component", pl.col("declared").fill_null(MISSING), pl.col("version").fill_null(MISSING), "device", *seen),
        target.pool, target.node)
    st.caption(VERSIONS_TEXT)
    st.dataframe(table, hide_index=True, width="stretch", column_config={
        **config, "first_seen": st.column_config.TextColumn("first seen (UTC)"),
        "last_seen": st.column_config.TextColumn("last seen (UTC)")})


def _events(target: Target, view: filters.View) -> None:
    st.subheader("Error events")
    events = node_data.device_events(data.db_path(), view.start_ms, view.end_ms, target.pool, target.node,
                                     target.device)
    if events.is_empty():
        st.success("No error events in this window.")
        return
    table, config = links.linked(events.select(pl.from_epoch("ts", time_unit="ms").alias("time"), pl.exclude("ts")),
                                 target.pool, target.node)
    st.caption("A blank device: an event of the whole node.")
    st.dataframe(table, hide_index=True, width="stretch",
                 column_config={**config, "count": st.column_config.NumberColumn(format="%d")})
