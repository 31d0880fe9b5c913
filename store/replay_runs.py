"""Saved replays in `replay_runs`: what ran (candidate, baseline, traffic, seed), its summary and verdict.

`candidate` and `baseline` hold the candidate files' canonical JSON; `summary` holds a JSON object
{"candidate": summary, "baseline": summary or null}, with "oracle": the candidate's summary under the oracle
predictor when the run measured the oracle gap; `reasons` is a JSON list of strings. `name` and `note`
are what the person who saved the run called it; `gate` holds the tolerances it was judged by and
`traffic_spec` how its traffic was picked (both JSON, NULL when unknown).
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import duckdb
import polars as pl

_COLUMNS = "run_id, created_at, name, note, candidate, baseline, traffic, seed, summary, verdict, reasons, gate, " \
           "traffic_spec"


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def save_replay_run(con: duckdb.DuckDBPyConnection, *, candidate: dict[str, Any],
                    baseline: dict[str, Any] | None, traffic: str, seed: int, summary: dict[str, Any],
                    baseline_summary: dict[str, Any] | None = None, verdict: str | None = None,
                    reasons: list[str] | None = None, name: str | None = None, note: str | None = None,
                    gate: dict[str, Any] | None = None, traffic_spec: dict[str, Any] | None = None,
                    oracle_summary: dict[str, Any] | None = None) -> int:
    """Store one replay and return its run_id."""
    summaries = {"candidate": summary, "baseline": baseline_summary}
    if oracle_summary is not None:
        summaries["oracle"] = oracle_summary
    row = con.execute(
        "INSERT INTO replay_runs (created_at, name, note, candidate, baseline, traffic, seed, summary, verdict, "
        "reasons, gate, traffic_spec) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING run_id",
        [dt.datetime.now(dt.UTC), name or None, note or None, _json(candidate),
         None if baseline is None else _json(baseline), traffic, seed,
         _json(summaries), verdict, _json(reasons or []),
         None if gate is None else _json(gate), None if traffic_spec is None else _json(traffic_spec)],
    ).fetchall()
    return int(row[0][0])


def list_replay_runs(con: duckdb.DuckDBPyConnection, limit: int = 100) -> pl.DataFrame:
    """The newest runs first, with their JSON columns as text."""
    return con.sql(f"SELECT {_COLUMNS} FROM replay_runs ORDER BY run_id DESC LIMIT ?", params=[limit]).pl()


def get_replay_run(con: duckdb.DuckDBPyConnection, run_id: int) -> dict[str, Any] | None:
    """One run with its JSON columns decoded, or None."""
    rows = con.execute(f"SELECT {_COLUMNS} FROM replay_runs WHERE run_id = ?", [run_id]).fetchall()
    if not rows:
        return None
    row = dict(zip([c.strip() for c in _COLUMNS.split(",")], rows[0], strict=True))
    for key in ("candidate", "summary", "reasons"):
        row[key] = json.loads(row[key])
    for key in ("baseline", "gate", "traffic_spec"):
        row[key] = json.loads(row[key]) if row[key] else None
    return row
