"""The Replay page's history: saved runs listed, one re-opened with its stored numbers, two compared."""

from __future__ import annotations

import json
from typing import Any

import polars as pl
import streamlit as st
import yaml

from app.console import data
from app.console.whatif import form as whatif_form
from app.console.whatif.results import kpi_table, oracle_warning, predictor_line
from pool_registry import Registry
from replay.candidate_loader import load_candidate_text
from replay.editor import form_of
from replay.exceptions import CandidateError
from replay.summary import Summary, summary_from_dict


def _label(row: dict[str, Any]) -> str:
    name = row["name"] or json.loads(row["candidate"]).get("name", "?")
    return f"{row['run_id']}: {name}"


def table(runs: pl.DataFrame) -> pl.DataFrame:
    """One row per saved run, with the numbers a lead scans for."""
    rows = []
    for r in runs.iter_rows(named=True):
        cand, base = json.loads(r["candidate"]), json.loads(r["baseline"]) if r["baseline"] else None
        summary = json.loads(r["summary"])["candidate"]
        rows.append({"run": r["run_id"], "saved": r["created_at"], "name": r["name"] or "", "note": r["note"] or "",
                     "candidate": cand.get("name"), "baseline": base.get("name") if base else "",
                     "verdict": r["verdict"] or "no gate", "busy cost": summary["busy_cost_usd"],
                     "p99 TTFT (s)": summary["ttft_p99"], "SLA violations": summary["sla_violation_rate"],
                     "traffic": r["traffic"]})
    return pl.DataFrame(rows)


def _summaries(run: dict[str, Any]) -> tuple[Summary, Summary | None]:
    both = run["summary"]
    return summary_from_dict(both["candidate"]), summary_from_dict(both["baseline"]) if both["baseline"] else None


def _edit(registry: Registry, run: dict[str, Any]) -> None:
    """Callback: load the run's candidate into the editor."""
    try:
        cand = load_candidate_text(yaml.safe_dump(run["candidate"]), registry, f"saved run {run['run_id']}")
    except CandidateError as exc:
        st.session_state["wi.history_error"] = str(exc)
        return
    whatif_form.load_form(form_of(registry, cand))
    st.session_state["wi.history_note"] = f"Run {run['run_id']}'s candidate is in the editor on the What-if tab."


def show(path: str, registry: Registry) -> None:
    """Draw the history."""
    runs = data.saved_runs(path)
    if runs.is_empty():
        st.info("No run is saved yet. Run a what-if and save it; `hetpool replay run` saves its runs here too.")
        return
    st.dataframe(table(runs), hide_index=True, width="stretch", column_config={
        "busy cost": st.column_config.NumberColumn(format="$%.2f"),
        "SLA violations": st.column_config.NumberColumn(format="percent")})
    labels = {int(r["run_id"]): _label(r) for r in runs.iter_rows(named=True)}
    opened = st.selectbox("Open a run", list(labels), format_func=labels.__getitem__, key="wi.open")
    run = data.saved_run(path, int(opened)) if opened is not None else None
    if run:
        _opened(run, registry)
    st.markdown("**Compare two runs**")
    pair = st.multiselect("Two runs", list(labels), format_func=labels.__getitem__, key="wi.compare",
                          max_selections=2)
    if len(pair) == 2:
        a, b = (data.saved_run(path, int(r)) for r in pair)
        if a and b:
            st.dataframe(kpi_table([(labels[pair[0]], _summaries(a)[0]), (labels[pair[1]], _summaries(b)[0])]),
                         hide_index=True, width="stretch")


def _opened(run: dict[str, Any], registry: Registry) -> None:
    cand, base = _summaries(run)
    name = run["name"] or run["candidate"].get("name")
    st.markdown(f"**Run {run['run_id']}: {name}**, saved {run['created_at']:%Y-%m-%d %H:%M} UTC"
                + (f". Note: {run['note']}" if run["note"] else ""))
    st.caption(f"{run['traffic']}, seed {run['seed']}.")
    base_name = (run["baseline"] or {}).get("name")
    if run["verdict"] == "pass":
        st.success(f"**Gate passed** against '{base_name}'.")
    elif run["verdict"] == "fail":
        st.error(f"**Gate failed** against '{base_name}':\n\n"
                 + "\n".join(f"- :material/cancel: {r}" for r in run["reasons"]))
    else:
        st.info("No gate ran on this run.")
    runs = [("candidate", cand)] + ([("baseline", base)] if base else [])
    oracle_warning(runs, "oracle" in run["summary"])
    st.dataframe(kpi_table(runs), hide_index=True, width="stretch", key=f"wi.opened_kpis.{run['run_id']}")
    st.caption(predictor_line(runs, 0))
    text = yaml.safe_dump(run["candidate"], sort_keys=False)
    c1, c2 = st.columns(2)
    c1.download_button("Download this run's candidate YAML", data=text, file_name=f"{run['candidate']['name']}.yaml",
                       mime="application/yaml", key="wi.opened_yaml", on_click="ignore")
    c2.button("Edit this candidate", key="wi.edit_opened", on_click=_edit, args=(registry, run))
    for k, show_as in (("wi.history_note", st.success), ("wi.history_error", st.error)):
        if k in st.session_state:
            show_as(st.session_state.pop(k))
