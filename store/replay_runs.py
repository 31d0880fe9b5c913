"""Saved replays in `replay_runs`: what ran (candidate, baseline, traffic, seed), its summary and verdict.

`candidate` and `baseline` hold the candidate files' canonical JSON; `summary` holds a JSON object
{"candidate": summary, "baseline": summary or null}; `reasons` is a JSON list of strings.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import duckdb
import polars as pl


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def save_replay_run(con: duckdb.DuckDBPyConnection, *, candidate: dict[str, Any],
                    baseline: dict[str, Any] | None, traffic: str, seed: int, summary: dict[str, Any],
                    baseline_summary: dict[str, Any] | None = None, verdict: str | None = None,
                    reasons: list[str] | None = None) -> int:
    """Store one replay and return its run_id."""
    row = con.execute(
        "INSERT INTO replay_runs (created_at, candidate, baseline, traffic, seed, summary, verdict, reasons) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING run_id",
        [dt.datetime.now(dt.UTC), _json(candidate), None if baseline is None else _json(baseline), traffic,
         seed, _json({"candidate": summary, "baseline": baseline_summary}), verdict, _json(reasons or [])],
    ).fetchall()
    return int(row[0][0])


def list_replay_runs(con: duckdb.DuckDBPyConnection, limit: int = 100) -> pl.DataFrame:
    """The newest runs first, with their JSON columns as text."""
    return con.sql(
        "SELECT run_id, created_at, candidate, baseline, traffic, seed, summary, verdict, reasons "
        "FROM replay_runs ORDER BY run_id DESC LIMIT ?", params=[limit]).pl()


def get_replay_run(con: duckdb.DuckDBPyConnection, run_id: int) -> dict[str, Any] | None:
    """One run with its JSON columns decoded, or None."""
    rows = con.execute(
        "SELECT run_id, created_at, candidate, baseline, traffic, seed, summary, verdict, reasons "
        "FROM replay_runs WHERE run_id = ?", [run_id]).fetchall()
    if not rows:
        return None
    row = rows[0]
    return {"run_id": row[0], "created_at": row[1], "candidate": json.loads(row[2]),
            "baseline": json.loads(row[3]) if row[3] else None, "traffic": row[4], "seed": row[5],
            "summary": json.loads(row[6]), "verdict": row[7], "reasons": json.loads(row[8])}
