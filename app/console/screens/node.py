"""Node: one node's status and its acknowledgement, its devices, metrics over time, error events, versions and
place in the registry; the Device page shows the same for one of its devices."""

from __future__ import annotations

import polars as pl
import streamlit as st

from app.console import acks, charts, filters, links, node_data, onboarding_data, page, timecharts
from app.console.safe import md
from app.console.targets import Target, wanted
from canonical.metrics import METRICS
from onboarding import Track
from pool_registry import Pool, Registry

MISSING = "–"  # a missing value, as everywhere in the console
VERSIONS_TEXT = (f"The pool's declared stack beside every version this node reported. {MISSING} under declared: the "
                 f"registry declares no version of that component; {MISSING} under version and seen: no exporter "
                 "reported it. A blank device: the version is the whole node's.")
SIBLINGS = 12  # sibling nodes named in the registry caption; more are counted


def render() -> None:
    """Draw the node the URL names (or a picker) for the sidebar's window."""
    opened = page.begin("Node", label=False)
    if opened is None:
        return
    target = wanted(opened.view, want_device=False)
    if target is not None:
        heading(target, opened)
        acks.node_panel(target.pool, target.node, opened.view)
        _devices(target, opened.path)
        details(target, opened)


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


def heading(target: Target, opened: page.Opened) -> None:
    """The node's (or device's) pool, chip and onboarding stage, its place in the registry, and the window."""
    path, reg = opened.path, opened.registry
    pool = reg.pool(target.pool)
    chip = reg.chip_of(pool)
    track = next((t for t in onboarding_data.onboarding_tracks(path) if t.pool == pool.id), None)
    st.markdown(f"**{md(target.node)}**{f' · device **{md(target.device)}**' if target.device else ''} · "
                f"pool **{md(pool.id)}** · {md(chip.vendor)} {md(chip.name)} · {stage_text(pool, track)}")
    known = node_data.known_devices(path, (pool.id,))
    st.caption(registry_text(reg, pool, target, sorted(set(known["node"].to_list()))))
    st.caption(opened.view.label())


def details(target: Target, opened: page.Opened) -> None:
    """The node's (or device's) versions, error events and metrics in the view's window."""
    path, view = opened.path, opened.view
    _versions(target, path, opened.registry.pool(target.pool))
    _events(target, path, view)
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


def _devices(target: Target, path: str) -> None:
    """The node's devices, each a link to its Device page."""
    st.subheader("Devices")
    devices = node_data.node_devices(path, target.pool, target.node)
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


def _versions(target: Target, path: str, pool: Pool) -> None:
    versions = node_data.device_versions(path, target.pool, target.node, target.device)
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


def _events(target: Target, path: str, view: filters.View) -> None:
    st.subheader("Error events")
    events = node_data.device_events(path, view.start_ms, view.end_ms, target.pool, target.node,
                                     target.device)
    if events.is_empty():
        st.success("No error events in this window.")
        return
    table, config = links.linked(events.select(pl.from_epoch("ts", time_unit="ms").alias("time"), pl.exclude("ts")),
                                 target.pool, target.node)
    st.caption("A blank device: an event of the whole node.")
    st.dataframe(table, hide_index=True, width="stretch",
                 column_config={**config, "count": st.column_config.NumberColumn(format="%d")})


if __name__ == "__main__":
    render()
