"""Start Streamlit on the console with its libraries and data layers imported first.

Streamlit imports a page's modules when the first visitor's session runs it; on a cold process that is seconds
of the first render (altair, polars, duckdb, the store's views, altair's schema on its first chart). Importing
them here, before the server listens, moves that wait to the start. Modules that use Streamlit's caches are left
to the page: their caches must be created inside Streamlit's runtime.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

_ROOT = Path(__file__).resolve().parents[2]
if sys.path and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
    sys.path[0] = str(_ROOT)  # run as a script: the project, not this folder, is what its imports mean
# layers with no Streamlit in them, as the console's pages import them
WARM = ("altair", "polars", "duckdb", "numpy", "store", "store.views.cost", "store.views.coverage",
        "store.views.drift", "store.views.export", "store.views.faults", "store.views.fleet", "store.views.health",
        "store.views.markers", "store.views.reliability", "store.views.runs", "store.views.versions",
        "pool_registry", "pool_registry.compat", "replay.planner.compat", "status.evaluate", "status.rules",
        "status.verdict", "app.status_read", "app.exceptions")


def warm(modules: tuple[str, ...] = WARM) -> list[str]:
    """Import the modules and validate one chart against altair's schema; the modules imported."""
    if str(_ROOT) not in sys.path:
        sys.path.insert(0, str(_ROOT))
    for name in modules:
        importlib.import_module(name)
    if "app.exceptions" in modules:
        # every page catches the layers' user errors: importing them loads the replay package (and scipy, half a
        # second), which would otherwise fall on the first visitor's session
        importlib.import_module("app.exceptions").user_errors()
    import altair as alt

    alt.Chart({"values": [{"t": 0, "v": 0}]}).mark_line().encode(x="t:Q", y="v:Q").to_dict()
    return list(modules)


def main(argv: list[str] | None = None) -> int:
    """`streamlit` with the given arguments (`run FILE ...`), after warm()."""
    warm()
    from streamlit.web import cli

    sys.argv = ["streamlit", *(sys.argv[1:] if argv is None else argv)]
    try:
        cli.main()
    except SystemExit as exc:
        return int(exc.code or 0) if not isinstance(exc.code, str) else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
