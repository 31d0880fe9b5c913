"""The console's root URL: Fleet health is served at /health, so the root switches to it, keeping the view."""

from __future__ import annotations

import streamlit as st

HEALTH_PAGE = "screens/health.py"


def render() -> None:
    """Open Fleet health with the query parameters (window, pools) the sidebar put in the URL."""
    st.switch_page(HEALTH_PAGE, query_params={k: st.query_params.get_all(k) for k in st.query_params})


if __name__ == "__main__":
    render()
