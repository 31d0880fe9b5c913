"""The Runway tab of the Replay page: when each pool breaks its SLA at the growth the store shows, with its band,
and the runway as Fleet health's pool cards say it."""

from __future__ import annotations

import time
from typing import Any

import polars as pl
import streamlit as st

from app.console import auth, cache, charts, data, writes
from app.console.whatif import charts as whatif_charts
from app.exceptions import USER_ERRORS
from app.runway_job import RunwayDone, compute_runway_job, rows
from pool_registry import Registry
from replay.candidate import Candidate
from replay.runway.breaking import MAX_LOAD
from replay.runway.curves import age_text, load_curve, violation_curve
from replay.runway.growth import parse_growth
from replay.runway.stored import RunwayAsk
from store import Store

RESULT_KEY = "wi.runway"
INTRO = ("At the growth the stored requests show, on which date does each pool first fail its SLA tolerance? The "
         "growth is fitted per pool with the days of the week taken out; the most recent week is replayed under "
         "the candidate at the load of future dates, as `hetpool replay runway` does.")


def runway_said(row: dict[str, Any], now_ms: int) -> str:
    """A pool's stored runway in a few words with its age: 'SLA runway ~6 weeks (computed 3 h ago)'."""
    age = age_text(int(row["computed_ms"]), now_ms)
    status = row.get("status") or "holds"
    if row["breaks_on"] is None:
        said = {"too_few": "no date (too few requests reach it under the candidate)",
                "no_growth": "no growth detected: holds at today's load",
                "holds_to_cap": f"holds to {MAX_LOAD:g} times today's load, short of its horizon"}.get(
            status, f"holds through its {row['horizon_weeks']:g}-week horizon")
        return f"SLA runway: {said} ({age})"
    weeks = max(0.0, (row["breaks_on"] - row["today"]).days / 7)
    left = "under a week" if weeks < 1 else f"~{weeks:.0f} weeks"
    return f"SLA runway {left}, to {row['breaks_on']} ({age})"


def show(path: str, registry: Registry, candidate: Candidate | None) -> None:
    """The tab: the runway as stored, options, a computation on demand, its charts, and keeping it."""
    st.caption(INTRO)
    stored = data.latest_runways(path)
    if stored.height:
        now = int(time.time() * 1000)
        st.markdown("**As stored** (Fleet health shows it; `hetpool serve` pages on it)")
        st.dataframe(stored.select(
            "pool", *(pl.col(c).cast(pl.String).fill_null("holds") for c in ("breaks_on", "breaks_on_low")),
            pl.col("breaks_on_high").cast(pl.String).fill_null("–"),
            (pl.col("growth_per_week") * 100).round(2).alias("growth %/week"), "candidate").with_columns(
            pl.Series("computed", [age_text(int(ms), now) for ms in stored["computed_ms"]])),
            hide_index=True, width="stretch")
    if candidate is None:
        st.info("A valid candidate on the What-if tab comes first: the runway replays under it.")
        return
    c1, c2, c3, c4 = st.columns(4)
    growth_text = c1.text_input("Growth", value="auto", key="wi.runway_growth",
                                help="auto fits it per pool from the window; or a rate such as 5%/week")
    window = int(c2.number_input("Window (days)", min_value=1, value=28, step=7, key="wi.runway_window"))
    horizon = float(c3.number_input("Horizon (weeks)", min_value=1, max_value=104, value=26, key="wi.runway_horizon"))
    tolerance = float(c4.number_input("SLA tolerance (%)", min_value=0.01, max_value=50.0, value=1.0, step=0.5,
                                      key="wi.runway_tolerance"))
    if st.button("Compute the runway", key="wi.runway_run", type="primary"):
        try:
            ask = RunwayAsk(window_days=window, growth=parse_growth(growth_text), horizon_weeks=horizon,
                            tolerance=tolerance / 100)
        except USER_ERRORS as exc:
            st.error(str(exc))
            return
        with st.status("Computing the runway…", expanded=True) as status:
            bar = st.progress(0.0, text="reading the stored requests")

            def say(share: float, what: str) -> None:
                bar.progress(min(1.0, share), text=what)

            try:
                done = compute_runway_job(Store(path, on_wait=cache.say_waiting), registry, candidate, ask,
                                          progress=say, save=False)
            except USER_ERRORS as exc:
                status.update(label="The runway could not be computed", state="error", expanded=True)
                st.error(str(exc))
                return
            status.update(label=f"Runway of {len(done.runway.pools)} pools: {done.runway.replayed}",
                          state="complete", expanded=False)
        st.session_state[RESULT_KEY] = (done, candidate.name)
        st.session_state.pop("wi.runway_saved", None)
    kept = st.session_state.get(RESULT_KEY)
    if kept is not None:
        _result(path, *kept)


def _result(path: str, done: RunwayDone, candidate: str) -> None:
    runway = done.runway
    for note in done.notes:
        st.caption(note)
    broken = runway.breaking
    st.markdown(f"**{len(broken)} of {len(runway.pools)} pools break within {runway.horizon_weeks:g} weeks** "
                f"(to {runway.horizon_end}), at an SLA tolerance of {runway.tolerance:.2%}."
                if broken else f"**Every pool holds its SLA through {runway.horizon_weeks:g} weeks** "
                               f"(to {runway.horizon_end}).")
    table = pl.DataFrame([p.data() for p in runway.pools]).drop("notes")
    st.dataframe(table.with_columns(
        *((pl.col(c) * 100).round(2).alias(c) for c in ("growth_per_week", "growth_low", "growth_high",
                                                         "violation_rate_now"))).rename(
        {"growth_per_week": "growth %/week", "growth_low": "low %", "growth_high": "high %",
         "violation_rate_now": "violations now %", "added_cost_per_month_usd": "added $/month"}),
        hide_index=True, width="stretch")
    for p in runway.pools:
        with st.container(border=True):
            st.markdown(f"**{p.pool}**: " + (f"breaks on {p.breaks_on} (between {p.breaks_on_low} and "
                                             f"{p.breaks_on_high or 'past the horizon'})" if p.breaks_on
                                             else "no breaking date within the horizon"))
            c1, c2 = st.columns(2)
            with c1:
                charts.show(whatif_charts.runway_load(load_curve(runway, p), {
                    "breaks_on": p.breaks_on, "breaks_on_low": p.breaks_on_low,
                    "breaks_on_high": p.breaks_on_high}))
            with c2:
                charts.show(whatif_charts.runway_violations(violation_curve(runway, p), runway.tolerance))
            for note in p.notes:
                st.caption(note)
    _save(path, done, candidate)


def _save(path: str, done: RunwayDone, candidate: str) -> None:
    if st.session_state.get("wi.runway_saved"):
        st.success("Stored: Fleet health's pool cards show it, and `hetpool serve` pages on it.")
        return
    user = auth.current()
    refusal = user.reason("save_runway") if user else "Log in to store capacity runways."
    if refusal:
        st.caption(refusal)
    if st.button("Store this runway", key="wi.runway_save", disabled=refusal is not None, help=refusal):
        try:  # checked again where it is written: a disabled button is no guard by itself
            writes.save_runway(path, done.computed_ms, rows(done.runway, candidate), user)
        except USER_ERRORS as exc:
            st.error(str(exc))
            return
        st.session_state["wi.runway_saved"] = True
        st.success("Stored: Fleet health's pool cards show it, and `hetpool serve` pages on it.")
