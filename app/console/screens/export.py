"""Export: canonical rows of the sidebar's window and pools, for chosen metrics, as CSV or Parquet."""

from __future__ import annotations

import streamlit as st

from app.console import data, filters, page
from app.console.filters import fmt_time

FORMATS = {"CSV": ("csv", "text/csv"), "Parquet": ("parquet", "application/vnd.apache.parquet")}
RESOLUTIONS = {"Auto": "auto", "Raw samples": "raw", "1-minute rollup": "1m", "1-hour rollup": "1h"}
RESOLUTION_NAMES = {"raw": "raw samples", "1m": "1-minute rollup rows", "1h": "1-hour rollup rows"}
MAX_ROWS = 5_000_000  # a browser download above this is better served by `hetpool export`


def render() -> None:
    """Pick metrics and a format; the file is built when the download is clicked."""
    opened = page.begin("Export", label=False)
    if opened is None:
        return
    path, view = opened.path, opened.view
    st.caption(f"{view.label()} · pools: {', '.join(view.pools)} (change both in the sidebar)")
    names = data.metric_names(path, view.start_ms, view.end_ms, view.pools)
    if not names:
        filters.empty_window("metrics")
        return
    metrics = tuple(st.multiselect("Metrics", names, key="export_metrics", placeholder="All metrics") or names)
    label = st.radio("Format", list(FORMATS), horizontal=True, key="export_format")
    fmt, mime = FORMATS[label]
    resolution = RESOLUTIONS[st.radio("Resolution", list(RESOLUTIONS), horizontal=True, key="export_resolution",
                                      help="Auto: raw samples up to 2 days while they are kept, the 1-minute "
                                           "rollup up to 14 days, the 1-hour rollup beyond. Rollup rows carry "
                                           "the bucket average as value, plus min, max, last and count.")]
    rows, used = data.export_count(path, view.start_ms, view.end_ms, view.pools, metrics, resolution)
    st.metric(f"Rows ({RESOLUTION_NAMES[used]})", f"{rows:,}")
    if rows == 0:
        filters.empty_window(f"{RESOLUTION_NAMES[used]} of these metrics")
        return
    if rows > MAX_ROWS:
        st.warning(f"{rows:,} rows is too many for a browser download; narrow the window or the metrics, "
                   "or use `hetpool export` on the command line.")
        return
    st.caption("First rows of the export")
    st.dataframe(data.export_preview(path, view.start_ms, view.end_ms, view.pools, metrics, resolution),
                 hide_index=True, width="stretch")
    name = f"hetpool_{fmt_time(view.start_ms)}_{fmt_time(view.end_ms)}".replace(" ", "T").replace(":", "")
    st.download_button(
        f"Download {label}", key="export_download", mime=mime, file_name=f"{name}.{fmt}", on_click="ignore",
        data=lambda: data.export_bytes(path, view.start_ms, view.end_ms, view.pools, metrics, fmt, resolution))


if __name__ == "__main__":
    render()
