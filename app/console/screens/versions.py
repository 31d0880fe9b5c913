"""Versions: declared against observed versions per pool (drift first), model x pool compatibility, coverage."""

from __future__ import annotations

import datetime as dt

import polars as pl
import streamlit as st

from app.console import data, filters, levels, links, page, tables
from app.console.safe import md
from pool_registry.compat import MEANINGS, PASS, STATUSES, Compat
from pool_registry.components import GROUP_TITLES, GROUPS
from store.views.versions import Cell

DRIFT_MARK = "DRIFT: "  # words in a table cell: a symbol there needs a font that has it
COLOURS = {"drift": "background-color: #f8d0d0", "HW_INCOMPATIBLE": "background-color: #f8d0d0",
           "FRAMEWORK_INCOMPATIBLE": "background-color: #fbe3c4", "FAIL": "background-color: #fff3b0",
           PASS: "background-color: #d9f2d9"}
DRIFT_TEXT = ("A cell drifts when the pool's nodes reported more than one version in the window, or one other "
              "than the declared stack. Declared versions no exporter reports show as 'not reported'.")
COMPAT_TEXT = ("Each model's required versions against each pool's declared stack, its number formats against the "
               "chip, and whether a layout `hetpool plan` considers (tensor parallel within a node, pipeline stages "
               "across nodes) holds its weights, working memory and the KV cache of one sequence at its full "
               "context: the verdict `hetpool versions` and `hetpool plan` give. "
               + " ".join(f"{s}: {MEANINGS[s]}." for s in reversed(STATUSES))
               + " `*` marks the model a pool is configured to serve.")


def render() -> None:
    """Draw the page for the sidebar's window and pools."""
    opened = page.begin("Versions")
    if opened is None:
        return
    view = opened.view
    report = data.version_report(opened.path, view.start_ms, view.end_ms, view.pools)
    _matrix(report["cells"], view.pools)
    _compatibility(report["compat"])
    _coverage(report["coverage"], report["per_node"], report["vanished"])


def _matrix(cells: tuple[Cell, ...], pools: tuple[str, ...]) -> None:
    st.subheader("Version matrix")
    st.caption(DRIFT_TEXT)
    drifted = [c for c in cells if c.drift]
    order = sorted(pools, key=lambda p: (not any(c.pool == p for c in drifted), pools.index(p)))
    groups = [g for g in GROUPS if any(c.group == g for c in cells)]
    rows = []
    for pool in order:
        row = {"pool": pool}
        for g in groups:
            mine = [c for c in cells if c.pool == pool and c.group == g]
            row[GROUP_TITLES[g]] = "\n".join(f"{DRIFT_MARK if c.drift else ''}{c.text()}" for c in mine)
        rows.append(row)
    table = pl.DataFrame(rows, schema=dict.fromkeys(["pool", *(GROUP_TITLES[g] for g in groups)], pl.String))
    tables.wrapped(table, lambda v: COLOURS["drift"] if v.startswith(DRIFT_MARK) else "")
    if not drifted:
        st.success("No drift: every pool runs one version of each component, the declared one where declared.")
        return
    st.warning(f"{len(drifted)} drifted cell(s); open one to see its nodes.")
    for c in drifted:
        with st.expander(f"{md(c.pool)} · {md(c.component)}: {md(c.reason)}", icon=levels.icon("warning")):
            table, config = links.linked(pl.DataFrame(
                [{"node": n.node, "version": n.version, "devices": n.devices, "first seen": _time(n.first_seen),
                  "last seen": _time(n.last_seen)} for n in c.nodes],
                schema={"node": pl.String, "version": pl.String, "devices": pl.Int64, "first seen": pl.String,
                        "last seen": pl.String}), c.pool)
            st.dataframe(table, hide_index=True, width="stretch", column_config=config)


def _compatibility(compat: tuple[Compat, ...]) -> None:
    st.subheader("Model × pool compatibility")
    st.caption(COMPAT_TEXT)
    if not compat:
        st.info("The registry declares no models.")
        return
    pools = list(dict.fromkeys(c.pool for c in compat))
    models = sorted(dict.fromkeys(c.model for c in compat),
                    key=lambda m: min(STATUSES.index(c.status) for c in compat if c.model == m))
    grid = {(c.model, c.pool): c for c in compat}
    table = pl.DataFrame([{"model": m, **{p: grid[m, p].status + ("*" if grid[m, p].serves else "") for p in pools}}
                          for m in models], schema=dict.fromkeys(["model", *pools], pl.String))
    tables.wrapped(table, lambda v: COLOURS.get(v.rstrip("*"), ""))
    # every cell, the failing ones first (served before not): what fails, or the smallest layout that holds it
    cells = sorted(compat, key=lambda c: (c.ok, not c.serves, STATUSES.index(c.status)))
    tables.wrapped(pl.DataFrame([{"model": c.model, "pool": c.pool, "status": c.status, "served": c.serves,
                                  "smallest layout that holds it": c.layout or "none",
                                  "failing requirement": c.requirement} for c in cells]),
                   lambda v: COLOURS.get(v, ""))


def _coverage(coverage: pl.DataFrame, per_node: pl.DataFrame, vanished: pl.DataFrame) -> None:
    st.subheader("Metric coverage by exporter version")
    st.caption("Canonical metrics each pool's nodes delivered while they ran an exporter version (the version "
               "the exporter reports, else the declared one); hours are the resolution.")
    if coverage.is_empty():
        filters.empty_window("metrics")
    else:
        tables.wrapped(coverage.select("pool", "exporter", "nodes", pl.col("metrics").list.len().alias("count"),
                                       pl.col("metrics").list.join(", ")))
        with st.expander(f"Per node ({per_node.select('pool', 'node').unique().height} nodes)"):
            st.caption("The metrics column is cut at its width: click a cell to read the whole list (the table "
                       "above lists them per exporter version).")
            table, config = links.linked(per_node.select(
                "pool", "node", pl.col("version").alias("exporter"), pl.col("metrics").list.len().alias("count"),
                pl.col("metrics").list.join(", ")))
            st.dataframe(table, hide_index=True, width="stretch", column_config=config)
    if vanished.is_empty():
        st.success("No metric disappeared after an exporter upgrade in this window.")
        return
    for r in vanished.iter_rows(named=True):
        nodes = ", ".join(links.markdown(r["pool"], n) for n in r["nodes"])
        st.warning(f"{md(r['pool'])}: {md(r['metric'])} stopped after the exporter went from {md(r['before'])} to "
                   f"{md(r['after'])} on {nodes} ({_time(r['upgraded_at'])} UTC).")


def _time(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).strftime("%Y-%m-%d %H:%M")


if __name__ == "__main__":
    render()
