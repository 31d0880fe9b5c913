"""Console entry point: `streamlit run app/console/main.py` with HETPOOL_DB set."""

from __future__ import annotations

import sys
from pathlib import Path

# streamlit runs this file as a script; make the project importable when it is not installed.
_ROOT = Path(__file__).resolve().parents[2]
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

import streamlit as st  # noqa: E402

from app.console import filters  # noqa: E402
from app.errors import USER_ERRORS  # noqa: E402

# Not "pages/": Streamlit would serve a folder of that name by itself, around the navigation.
PAGES = Path(__file__).resolve().parent / "screens"


def main() -> None:
    """Build the navigation, draw the shared sidebar, and run the selected page."""
    st.set_page_config(page_title="hetpool", layout="wide")
    pages = [
        st.Page(PAGES / "health.py", title="Fleet health", url_path="health", default=True),
        st.Page(PAGES / "reliability.py", title="Errors and reliability", url_path="reliability"),
        st.Page(PAGES / "cost.py", title="Cost", url_path="cost"),
        st.Page(PAGES / "export.py", title="Export", url_path="export"),
        st.Page(PAGES / "fleet.py", title="Fleet registry", url_path="fleet"),
    ]
    page = st.navigation(pages)
    try:
        st.session_state[filters.VIEW_KEY] = filters.sidebar()
        page.run()
    except USER_ERRORS as exc:
        st.error(str(exc))


main()
