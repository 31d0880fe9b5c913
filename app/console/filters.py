"""The sidebar every page shares: a time range and a pool filter, kept in st.session_state and in the URL.

The URL holds `window` (6h, 24h, 7d, all or days, with `from` and `to` as YYYY-MM-DD for days), one `pool`
per selected pool and `refresh=1` while auto-refresh is on, so a link opens the same view; the URL is read
once per session, after which the widgets rule and are written back to it.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import streamlit as st

from app.console import cache, data
from app.console.charts import bucket_ms
from app.console.timecharts import Timeline
from canonical.timeunits import DAY_MS, HOUR_MS

PRESETS = {"Last 6 hours": 6 * HOUR_MS, "Last 24 hours": DAY_MS, "Last 7 days": 7 * DAY_MS, "All data": 0}
CUSTOM = "Custom days"
DEFAULT_PRESET = "Last 24 hours"
SHORT_SPAN_MS = 6 * HOUR_MS  # a store holding less than this opens on all of it, not as a dash at a day's end
WINDOW_KEY, DAYS_KEY, POOLS_KEY, LIVE_KEY = "window", "window_days", "pools", "live"
TOKENS = {"Last 6 hours": "6h", "Last 24 hours": "24h", "Last 7 days": "7d", "All data": "all", CUSTOM: "days"}
REFRESH_S = 30  # how often auto-refresh looks for new commits; a rerun happens only when there is one
_URL_READ = "_hetpool_url_read"
KEEP = ("node", "device")  # owned by the Node and Device pages: the sidebar rewrites the URL around them


@dataclass(frozen=True)
class View:
    """What the sidebar selected: a window on whole hours, the pools in view, and the data's span."""

    start_ms: int
    end_ms: int
    pools: tuple[str, ...]
    all_pools: tuple[str, ...]

    @property
    def hours(self) -> float:
        """Window length in hours."""
        return (self.end_ms - self.start_ms) / HOUR_MS

    def step_ms(self) -> int:
        """Chart resolution: the bucket the window's length calls for (see charts.bucket_ms)."""
        return bucket_ms(self.end_ms - self.start_ms)

    def timeline(self) -> Timeline:
        """The window and its chart bucket, for a time axis."""
        return Timeline(self.start_ms, self.end_ms, self.step_ms())

    def label(self) -> str:
        """The window as text, in UTC."""
        return f"{fmt_time(self.start_ms)} to {fmt_time(self.end_ms)} UTC"


def fmt_time(ms: int) -> str:
    """Epoch ms as 'YYYY-MM-DD HH:MM'."""
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).strftime("%Y-%m-%d %H:%M")


def fmt_step(ms: int) -> str:
    """A bucket length in words: '15 minutes', '1 hour', '2 days'."""
    for unit, size in (("day", DAY_MS), ("hour", HOUR_MS), ("minute", 60_000)):
        if ms >= size and ms % size == 0:
            n = ms // size
            return f"{n} {unit}{'s' if n != 1 else ''}"
    return f"{ms / 1000:g} s"


def window_for(choice: str, span: tuple[int, int], days: tuple[dt.date, dt.date] | None = None) -> tuple[int, int]:
    """A window on whole hours ending with the hour that holds the newest sample (or on whole custom days)."""
    first = span[0] - span[0] % HOUR_MS
    end = span[1] - span[1] % HOUR_MS + HOUR_MS
    if choice == CUSTOM and days:
        lo = int(dt.datetime.combine(days[0], dt.time(), dt.UTC).timestamp() * 1000)
        hi = int(dt.datetime.combine(days[-1], dt.time(), dt.UTC).timestamp() * 1000) + DAY_MS
        return max(lo, first), max(min(hi, end), max(lo, first) + HOUR_MS)
    length = PRESETS.get(choice, DAY_MS)
    return (first if length == 0 else end - length), end


def default_preset(span: tuple[int, int]) -> str:
    """The window a page opens on: the last 24 hours, or all data while the store holds less than 6 hours."""
    return "All data" if span[1] - span[0] < SHORT_SPAN_MS else DEFAULT_PRESET


def sidebar() -> View | None:
    """Draw the shared filters; None when the store has no registry or no samples yet."""
    path = cache.db_path()
    reg = data.registry(path)
    span = data.span(path)
    st.sidebar.header("View")
    if reg is None or span is None:
        st.sidebar.caption("No metrics in the database yet.")
        return None
    all_pools = tuple(p.id for p in reg.pools)
    lo_day = dt.datetime.fromtimestamp(span[0] / 1000, dt.UTC).date()
    hi_day = dt.datetime.fromtimestamp(span[1] / 1000, dt.UTC).date()
    restore_from_url(all_pools, (lo_day, hi_day))
    st.session_state.setdefault(WINDOW_KEY, default_preset(span))
    choice = st.sidebar.selectbox("Time range", [*PRESETS, CUSTOM], key=WINDOW_KEY)
    days = None
    if choice == CUSTOM:
        st.session_state.setdefault(DAYS_KEY, (lo_day, hi_day))
        picked = st.sidebar.date_input("Days (UTC)", min_value=lo_day, max_value=hi_day, key=DAYS_KEY)
        days = tuple(picked) if isinstance(picked, tuple | list) and picked else (lo_day, hi_day)
    start, end = window_for(choice, span, days)
    picked_pools = st.sidebar.multiselect("Pools", all_pools, key=POOLS_KEY, placeholder="All pools")
    pools = tuple(p for p in all_pools if p in picked_pools) or all_pools
    live = st.sidebar.toggle("Auto-refresh", key=LIVE_KEY,
                             help=f"Looks for new commits every {REFRESH_S} s and redraws the page when there are.")
    write_to_url(choice, days, [p for p in all_pools if p in picked_pools], live)
    view = View(start, end, pools, all_pools)
    st.sidebar.caption(f"{view.label()}; data from {fmt_time(span[0])} to {fmt_time(span[1])} UTC.")
    return view


def restore_from_url(all_pools: tuple[str, ...], days: tuple[dt.date, dt.date]) -> None:
    """Put the URL's window, pools and auto-refresh into the widgets' state, once per session."""
    if st.session_state.get(_URL_READ):
        return
    st.session_state[_URL_READ] = True
    qp = st.query_params
    choice = {token: name for name, token in TOKENS.items()}.get(qp.get("window", ""))
    if choice:
        st.session_state[WINDOW_KEY] = choice
    if choice == CUSTOM:
        lo, hi = _day(qp.get("from"), days), _day(qp.get("to"), days)
        if lo and hi and lo <= hi:
            st.session_state[DAYS_KEY] = (lo, hi)
    pools = [p for p in all_pools if p in qp.get_all("pool")]
    if pools:
        st.session_state[POOLS_KEY] = pools
    if qp.get("refresh") == "1":
        st.session_state[LIVE_KEY] = True


def _day(text: str | None, bounds: tuple[dt.date, dt.date]) -> dt.date | None:
    """A YYYY-MM-DD day inside the data's days, else None."""
    try:
        day = dt.date.fromisoformat(text or "")
    except ValueError:
        return None
    return day if bounds[0] <= day <= bounds[1] else None


def write_to_url(choice: str, days: tuple[dt.date, ...] | None, pools: list[str], live: bool) -> None:
    """Mirror the sidebar in the URL, so copying it shares this view."""
    wanted: dict[str, str | list[str]] = {"window": TOKENS.get(choice, TOKENS[DEFAULT_PRESET])}
    if choice == CUSTOM and days:
        wanted.update({"from": days[0].isoformat(), "to": days[-1].isoformat()})
    if pools:
        wanted["pool"] = pools
    if live:
        wanted["refresh"] = "1"
    wanted.update({k: st.query_params[k] for k in KEEP if k in st.query_params})
    current = {k: st.query_params.get_all(k) if k == "pool" else st.query_params.get(k) for k in st.query_params}
    if current != wanted:
        st.query_params.from_dict(wanted)


@st.fragment(run_every=REFRESH_S)
def follow(path: str, seen: object) -> None:
    """While auto-refresh is on: rerun the whole page as soon as the database changed since it was drawn."""
    if cache.generation(path) != seen:
        st.rerun()


VIEW_KEY = "_hetpool_view"
NO_DATA = ("No metrics in this database yet. Build the demo with `hetpool demo`, or bring metrics in with "
           "`hetpool ingest`, then reload.")
NO_REGISTRY = "No registry loaded yet. Load one with `hetpool registry load examples/fleet.yaml`."


def current() -> View | None:
    """The view the sidebar selected in this run, or an st.info saying what is missing and None."""
    view = st.session_state.get(VIEW_KEY)
    if view is None:
        reg = data.registry(cache.db_path())
        st.info(NO_REGISTRY if reg is None else NO_DATA)
    return view


def narrowed() -> tuple[str, ...] | None:
    """The pools picked in the sidebar, or None while it shows all of them (or draws no view)."""
    view = st.session_state.get(VIEW_KEY)
    if view is None or set(view.pools) == set(view.all_pools):
        return None
    return tuple(view.pools)


def empty_window(what: str) -> None:
    """The message for a window that holds no data of some kind."""
    st.info(f"No {what} in this window. Pick a longer time range or other pools in the sidebar.")
