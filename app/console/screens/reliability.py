"""Errors and reliability: error classes over time, the event table, the reliability index, nodes to drain."""

from __future__ import annotations

import polars as pl
import streamlit as st

from app.console import charts, data, filters, links, page, tables, targets, timecharts
from app.console.safe import md
from store.views.reliability import EVENT_LIMIT

FORMULA = (r"R = \frac{\text{healthy device-hours}}"
           r"{\text{devices of the pool} \times \text{hours the pool reported}}")
FORMULA_TEXT = """
The **devices of the pool** are those the registry declares (or those that reported, when more did). A
device-hour is **healthy** when the device reported utilization in that hour, its health never read 0, and no
fatal error event was recorded on it (or on its node as a whole). A device that never reported in the window
(**silent**) is unhealthy every hour, and devices that vanish keep counting against their pool; hours before a
pool's first sample (a pool being onboarded) do not.
"""
DRAIN_TEXT = ("A node is to be drained when, in this window, it recorded a fatal error event, one of its devices "
              "last read unhealthy, or one of its devices stopped reporting.")


def events_caption(shown: int, limit: int) -> str:
    """What the event table holds, in words that agree with the count."""
    if shown >= limit:
        return f"The newest {shown:,} error events of the window"
    return f"The window's {shown:,} error {'event' if shown == 1 else 'events'}"


def render() -> None:
    """Draw the page for the sidebar's window and pools."""
    opened = page.begin("Errors and reliability")
    if opened is None:
        return
    path, view, reg = opened.path, opened.view, opened.registry
    vendor = {p.id: reg.chip_of(p).vendor for p in reg.pools}

    st.subheader("Nodes to drain")
    drain = data.nodes_to_drain(path, view.start_ms, view.end_ms, view.pools)
    st.caption(DRAIN_TEXT)
    if drain.is_empty():
        st.success("No node needs draining in this window.")
    else:
        table, config = links.linked(drain.select("pool", "node", "reasons", "fatal_events", "codes"))
        st.caption(tables.CUT)
        st.dataframe(table, hide_index=True, width="stretch",
                     column_config={**config, "fatal_events": st.column_config.NumberColumn(format="%d")})
        # a page link's label renders Markdown (images too): the names are escaped
        for pool, node in drain.select("pool", "node").head(targets.PAGE_LINKS).iter_rows():
            st.page_link("screens/node.py", label=f"Node {md(node)} ({md(pool)})",
                         query_params=targets.params(targets.Target(pool, node)))

    st.subheader("Reliability index")
    rel = data.reliability_index(path, view.start_ms, view.end_ms, view.pools)
    st.latex(FORMULA)
    st.markdown(FORMULA_TEXT)
    if rel.is_empty():
        filters.empty_window("device metrics")
    else:
        rel = rel.sort("index", "pool")  # worst first, in the bars and the table
        charts.show(charts.reliability_bars(rel, list(view.all_pools)))
        # below the bars at full width, R first after the pool: every column shows whole
        tables.wrapped(rel.select("pool", pl.format("{}%", (pl.col("index") * 100).round(1)).alias("R"),
                                  "devices", "silent", "healthy", "observed", "hours")
                       .rename({"healthy": "healthy device-hours", "observed": "observed device-hours",
                                "silent": "silent (never reported)", "hours": "hours reported"}))

    st.subheader("Error classes over time")
    timeline = data.error_timeline(path, view.start_ms, view.end_ms, view.pools, view.step_ms())
    if timeline.is_empty():
        st.success("No error events in this window.")
        return
    labelled = timeline.with_columns(
        pl.format("{} · {}", "pool", pl.col("pool").replace_strict(vendor, default="?")).alias("label"))
    charts.show(timecharts.errors_over_time(labelled, view.timeline()))
    by_vendor = (labelled.with_columns(pl.col("pool").replace_strict(vendor, default="?").alias("vendor"))
                 .group_by("vendor", "error_class", "severity").agg(pl.col("events").sum())
                 .sort("vendor", "events", descending=[False, True]))
    st.caption("Events by vendor and class")
    st.dataframe(by_vendor, hide_index=True, width="stretch",
                 column_config={"events": st.column_config.NumberColumn(format="%d")})

    st.subheader("Error events")
    events = data.error_events(path, view.start_ms, view.end_ms, view.pools)
    shown = events.with_columns(
        pl.from_epoch("ts", time_unit="ms").alias("time"),
        pl.col("pool").replace_strict(vendor, default="?").alias("vendor"),
    ).select("time", "pool", "vendor", "node", "device", "code", "error_class", "severity", "count")
    st.caption(f"{events_caption(shown.height, EVENT_LIMIT)} (vendor code kept as the exporter wrote it; a blank "
               "device: an event of the whole node).")
    table, config = links.linked(shown)
    st.dataframe(table, hide_index=True, width="stretch",
                 column_config={**config, "count": st.column_config.NumberColumn(format="%d")})


if __name__ == "__main__":
    render()
