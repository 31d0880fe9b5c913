"""Links to the Node and Device pages: one URL for every table cell, page link and sentence naming a node or device.

Names are untrusted exporter labels. In a URL they are percent-encoded; a table shows the name the link opens
through the LinkColumn's display_text pattern, which Streamlit decodes and draws as plain text; in Markdown the
link text is escaped.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Mapping
from typing import Any

import polars as pl
import streamlit as st

from app.console.safe import md

NODE_PAGE, DEVICE_PAGE = "node", "device"  # the url_path of each page in main.py
# LinkColumn display_text: a pattern with a group shows that part of the URL, percent-decoded
NODE_TEXT, DEVICE_TEXT = r"[?&]node=([^&]*)", r"[?&]device=([^&]*)"
WINDOW_PARAMS = ("window", "from", "to")  # the sidebar's time range in the URL (see filters)


def url(pool: str, node: str, device: str | None = None, view: Mapping[str, str] | None = None) -> str:
    """A relative URL to the Node page (or, with a device, the Device page), with the view's time range."""
    params = {"node": node, "pool": pool, **({"device": device} if device is not None else {}), **(view or {})}
    return f"{DEVICE_PAGE if device is not None else NODE_PAGE}?{urllib.parse.urlencode(params)}"


def view_params() -> dict[str, str]:
    """The time range the sidebar put in this page's URL, so that a link opens the page on the same window."""
    return {k: st.query_params[k] for k in WINDOW_PARAMS if k in st.query_params}


def markdown(pool: str, node: str, device: str | None = None) -> str:
    """A Markdown link to the node's (or device's) page whose text is the escaped name."""
    return f"[{md(node if device is None else device)}]({url(pool, node, device, view_params())})"


def linked(frame: pl.DataFrame, pool: str | None = None,
           node: str | None = None) -> tuple[pl.DataFrame, dict[str, Any]]:
    """The frame with its `node` column (and its `device` column, when it has one) holding links to their pages on
    the sidebar's time range, and the column_config that shows each link as the name it opens.

    Pool and node come from the frame's `pool` and `node` columns unless given (a frame of one node's rows, whose
    node column is then not needed). A blank node or device (a pool-wide or node-wide row) stays blank, with no
    link (an empty text, not the "None" a missing value reads as).
    """
    view = view_params()
    pools = [pool] * frame.height if pool is not None else frame["pool"].to_list()
    nodes = [node] * frame.height if node is not None else frame["node"].to_list()
    out: dict[str, list[str]] = {}
    config: dict[str, Any] = {}
    if node is None:
        out["node"] = [url(p, n, view=view) if n else "" for p, n in zip(pools, nodes, strict=True)]
        config["node"] = st.column_config.LinkColumn(display_text=NODE_TEXT, help="Opens the node's page")
    if "device" in frame.columns:
        out["device"] = [url(p, n, d, view) if n and d else ""
                         for p, n, d in zip(pools, nodes, frame["device"].to_list(), strict=True)]
        config["device"] = st.column_config.LinkColumn(display_text=DEVICE_TEXT, help="Opens the device's page")
    return frame.with_columns(pl.Series(k, v, dtype=pl.String) for k, v in out.items()), config
