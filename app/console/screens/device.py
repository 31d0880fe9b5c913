"""Device: one device's status and its acknowledgement, metrics over time, error events, versions and place in
the registry (the sections of its Node page, narrowed to the device)."""

from __future__ import annotations

import streamlit as st

from app.console import acks, page
from app.console.links import NODE_PAGE
from app.console.safe import md
from app.console.screens import node
from app.console.targets import Target, params, wanted


def render() -> None:
    """Draw the device the URL names (or a picker) for the sidebar's window."""
    opened = page.begin("Device", label=False)
    if opened is None:
        return
    target = wanted(opened.view, want_device=True)
    if target is not None:
        node.heading(target, opened)
        acks.status_panel(target.pool, target.node, target.device, opened.view)  # silenced from the Node page
        # a page link's label renders Markdown (images too): the name is escaped
        st.page_link(f"screens/{NODE_PAGE}.py", label=f"Node {md(target.node)}",
                     query_params=params(Target(target.pool, target.node)))
        node.details(target, opened)


if __name__ == "__main__":
    render()
