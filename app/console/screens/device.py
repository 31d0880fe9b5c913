"""Device: one device's metrics over time, error events, versions and place in the registry."""

from __future__ import annotations

import streamlit as st

from app.console import drill, filters


def render() -> None:
    """Draw the device the URL names (or a picker) for the sidebar's window."""
    st.title("Device")
    view = filters.current()
    if view is None:
        return
    target = drill.wanted(view, want_device=True)
    if target is not None:
        drill.show(target, view)


if __name__ == "__main__":
    render()
