"""Device: one device's status and its acknowledgement, metrics over time, error events, versions and place in
the registry."""

from __future__ import annotations

import streamlit as st

from app.console import acks, drill, filters


def render() -> None:
    """Draw the device the URL names (or a picker) for the sidebar's window."""
    st.title("Device")
    view = filters.current()
    if view is None:
        return
    target = drill.wanted(view, want_device=True)
    if target is not None:
        acks.status_panel(target.pool, target.node, target.device, view)  # silenced from the Node page
        drill.show(target, view)


if __name__ == "__main__":
    render()
