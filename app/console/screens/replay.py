"""Replay what-if: pick traffic, edit a candidate, replay it beside a baseline and see the gate; calibrate, check
capacity, see each pool's SLA runway, plan a model's layouts, sweep a grid, and keep a history of runs."""

from __future__ import annotations

import streamlit as st

from app.console import cache, data, filters
from app.console.filters import NO_REGISTRY
from app.console.whatif import form as whatif_form
from app.console.whatif import history as whatif_history
from app.console.whatif import panels as whatif_panels
from app.console.whatif import plan as whatif_plan
from app.console.whatif import results as whatif_results
from app.console.whatif import runway as whatif_runway
from app.console.whatif import traffic as whatif_traffic
from replay.editor import check_form

INTRO = ("Replay real request traffic against a candidate routing policy and cost model, beside a baseline on the "
         "same traffic with the same seed, and see whether the gate lets it go live. Every number is the replay "
         "model's, the same as `hetpool replay run` prints.")


def render() -> None:
    """Draw the page."""
    st.title("Replay what-if")
    st.caption(INTRO)
    path = cache.db_path()
    registry = data.registry(path)
    if registry is None:
        st.info(NO_REGISTRY)
        return
    whatif_form.ensure_form(registry)
    if filters.narrowed() is not None:
        st.caption("The sidebar's pools narrow the Calibration tab alone: a replay routes over the whole fleet, so the "
                   "what-if, capacity, plan and sweep take every pool of the registry (a candidate can change any).")
    what_if, calibration, capacity, runway, plan, sweep, history = st.tabs(
        ["What-if", "Calibration", "Capacity", "Runway", "Plan", "Sweep", "History"])
    with what_if:
        st.subheader("1. Traffic")
        pick = whatif_traffic.pick_traffic(path, registry)
        st.subheader("2. Candidate")
        whatif_form.editor(registry)
        form = whatif_form.read_form(registry)
        candidate, problems, text = check_form(form, registry)
        for problem in problems:
            st.error(problem)
        with st.expander("Candidate YAML (what `hetpool replay run --candidate` would read)"):
            st.code(text, language="yaml", line_numbers=True)
        st.subheader("3. Baseline and gate")
        baseline, base_problems = whatif_form.baseline(path, registry, form)
        gate, gate_problems = whatif_form.gate()
        for problem in base_problems + gate_problems:
            st.error(problem)
        c1, c2, c3 = st.columns([1, 2, 1])
        seed = int(c1.number_input("Seed", key="wi.seed", value=0, step=1))
        gap = c2.checkbox("Also replay with the oracle predictor (the oracle gap)", key="wi.oracle_gap",
                          help=whatif_results.GAP_HELP)
        ready = pick is not None and candidate is not None and not base_problems and not gate_problems
        clicked = c3.button("Run replay", type="primary", key="wi.run", disabled=not ready,
                            help=None if ready else "Fix what is marked above first.")
        if clicked and ready and pick is not None and candidate is not None:
            whatif_results.run(pick, candidate, text, registry, baseline, gate, seed, oracle_gap=gap)
        outcome = st.session_state.get(whatif_results.RESULT_KEY)
        if outcome is not None:
            whatif_results.show(outcome, path, registry)
    with calibration:
        whatif_panels.calibration(path, registry, pick, filters.narrowed())
    with capacity:
        whatif_panels.capacity(registry, candidate)
    with runway:
        whatif_runway.show(path, registry, candidate)
    with plan:
        whatif_plan.show(registry)
    with sweep:
        whatif_panels.sweep(registry, candidate, pick)
    with history:
        whatif_history.show(path, registry)


if __name__ == "__main__":
    render()
