"""Console entry point: `streamlit run app/console/main.py` with HETPOOL_DB set."""

from __future__ import annotations

import sys
from pathlib import Path

# streamlit runs this file as a script; make the project importable when it is not installed.
_ROOT = Path(__file__).resolve().parents[2]
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

import streamlit as st  # noqa: E402

from app.console import auth, cache, filters  # noqa: E402
from app.exceptions import USER_ERRORS  # noqa: E402
from app.plugins import load_plugins  # noqa: E402

# Not "pages/": Streamlit would serve a folder of that name by itself, around the navigation.
PAGES = Path(__file__).resolve().parent / "screens"


def main() -> None:
    """Build the navigation, draw the shared sidebar, and run the selected page."""
    st.set_page_config(page_title="hetpool", layout="wide")
    if auth.gate() is None:  # not logged in, or the roles file is broken: no page runs
        return
    pages = [
        # the root is a hidden page that switches to Fleet health: the default page is served at / alone, so
        # Fleet health as the default would not open at /health
        st.Page(PAGES / "root.py", title="Fleet health", url_path="", default=True, visibility="hidden"),
        st.Page(PAGES / "health.py", title="Fleet health", url_path="health"),
        st.Page(PAGES / "reliability.py", title="Errors and reliability", url_path="reliability"),
        st.Page(PAGES / "versions.py", title="Versions", url_path="versions"),
        st.Page(PAGES / "onboarding.py", title="Onboarding", url_path="onboarding"),
        st.Page(PAGES / "cost.py", title="Cost", url_path="cost"),
        st.Page(PAGES / "replay.py", title="Replay what-if", url_path="replay"),
        st.Page(PAGES / "export.py", title="Export", url_path="export"),
        st.Page(PAGES / "collectors.py", title="Collectors", url_path="collectors"),
        st.Page(PAGES / "fleet.py", title="Fleet registry", url_path="fleet"),
        st.Page(PAGES / "node.py", title="Node", url_path="node"),
        st.Page(PAGES / "device.py", title="Device", url_path="device"),
    ]
    page = st.navigation(pages)
    cache.show_waits_in(st.empty())
    path = cache.db_path()
    seen = cache.generation(path)  # before the page reads, so a commit during the run is caught by the next check
    try:
        load_plugins()
        say_if_replaced(path)
        st.session_state[filters.VIEW_KEY] = filters.sidebar()
        page.run()
    except USER_ERRORS as exc:
        st.error(str(exc))
    if st.session_state.get(filters.LIVE_KEY):
        filters.follow(path, seen)


def say_if_replaced(path: str) -> None:
    """Tell the user when the database file was swapped for another since their last view (a new demo)."""
    gen = cache.generation(path)
    inode = gen[0] if gen else None
    before = st.session_state.get(_INODE_KEY)
    st.session_state[_INODE_KEY] = inode
    if before is not None and inode is not None and inode != before:
        st.info(f"The database `{path}` was replaced by a new file since your last view (for example by "
                "`hetpool demo`); everything below is read from the new one.")


_INODE_KEY = "_hetpool_db_inode"


main()
