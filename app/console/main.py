"""Console entry point: `streamlit run app/console/main.py` with HETPOOL_DB set."""

from __future__ import annotations

import sys
from pathlib import Path

# streamlit runs this file as a script; make the project importable when it is not installed.
_ROOT = Path(__file__).resolve().parents[2]
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

import streamlit as st  # noqa: E402

from app.console.errors import guarded  # noqa: E402
from app.console.pages import fleet  # noqa: E402


def main() -> None:
    """Build the navigation and run the selected page."""
    st.set_page_config(page_title="hetpool", layout="wide")
    pages = [st.Page(guarded(fleet.render), title="Fleet", url_path="fleet", default=True)]
    st.navigation(pages).run()


main()
