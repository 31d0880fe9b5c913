"""Ingest runs by source: what each collector or command stored last, for the console's Collectors page."""

from __future__ import annotations

import duckdb
import polars as pl

SOURCES_SCHEMA = {"kind": pl.String, "source": pl.String, "runs": pl.Int64, "last_run": pl.Datetime("us", "UTC"),
                  "last_status": pl.String, "last_read": pl.Int64, "last_stored": pl.Int64, "last_rejected": pl.Int64,
                  "last_ignored": pl.Int64, "last_duplicates": pl.Int64, "stored": pl.Int64, "rejected": pl.Int64,
                  "failed_runs": pl.Int64, "newest_sample_ms": pl.Int64}


def sources(con: duckdb.DuckDBPyConnection, limit: int = 200) -> pl.DataFrame:
    """One row per (kind, source), newest run first: totals, and the last run's status and counts."""
    frame = con.sql(
        "SELECT kind, source, count(*) AS runs, max(finished_at) AS last_run, "
        "arg_max(status, run_id) AS last_status, arg_max(read, run_id) AS last_read, "
        "arg_max(stored, run_id) AS last_stored, arg_max(rejected, run_id) AS last_rejected, "
        "arg_max(ignored, run_id) AS last_ignored, arg_max(duplicates, run_id) AS last_duplicates, "
        "sum(stored) AS stored, sum(rejected) AS rejected, count(*) FILTER (WHERE status = 'failed') AS failed_runs, "
        "max(window_end) AS newest_sample_ms FROM ingest_runs GROUP BY kind, source "
        "ORDER BY last_run DESC NULLS LAST LIMIT ?", params=[limit]).pl()
    return frame.cast(SOURCES_SCHEMA) if frame.height else pl.DataFrame(schema=SOURCES_SCHEMA)  # type: ignore[arg-type]
