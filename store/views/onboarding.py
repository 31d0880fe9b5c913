"""What the onboarding tracker reads from the store about a pool: telemetry, rejects, routed requests, replays.

A reject belongs to a pool when its ingest run's source or its record names one of the pool's nodes. It is
explained when the normalizer refused a value it understood (NaN, Inf, a vendor sentinel, a value out of
range, a duplicate line); any other reject (an unmapped metric, an unparsable line) is unexplained.
"""

from __future__ import annotations

import json
from typing import Any

import duckdb
import polars as pl

from store.db import fetch_one
from store.views.health import ERRORS, MEM_USED
from store.views.window import frame

EXPLAINED = ("value ", "duplicate series")  # reject reasons of values that were read and refused
RUNS_SCANNED = 200


def pool_span(con: duckdb.DuckDBPyConnection, pool: str) -> tuple[int | None, int | None]:
    """(first, newest) sample time of the pool, from the hourly rollup."""
    row = fetch_one(con, "SELECT min(bucket), max(last_ts) FROM rollup_1h WHERE pool = ?", [pool])
    return (None, None) if not row or row[0] is None else (int(row[0]), int(row[1]))


def metrics_seen(con: duckdb.DuckDBPyConnection, pool: str) -> pl.DataFrame:
    """Each canonical metric of the pool: the hour it first arrived and how many devices sent it."""
    return frame(con, """
        SELECT metric, min(bucket) AS first_ms, count(DISTINCT (node, device)) FILTER (WHERE device <> '') AS devices
        FROM rollup_1h WHERE pool = ? GROUP BY metric ORDER BY metric""", [pool])


def devices_heard(con: duckdb.DuckDBPyConnection, pool: str) -> int:
    """Distinct devices that sent an accelerator metric."""
    row = fetch_one(con, "SELECT count(DISTINCT (node, device)) FROM rollup_1h WHERE pool = ? AND device <> '' "
                         "AND metric LIKE 'accelerator.%'", [pool])
    return int(row[0]) if row else 0


def unexplained_rejects(con: duckdb.DuckDBPyConnection, pool: str) -> tuple[int, str]:
    """How many rejects of the pool's nodes are unexplained (see the module doc), and one reason as an example."""
    explained = " AND ".join("NOT starts_with(r.reason, ?)" for _ in EXPLAINED)
    row = fetch_one(con, f"""
        WITH nodes AS (SELECT DISTINCT node FROM rollup_1h WHERE pool = ?)
        SELECT count(*), any_value(r.reason) FROM rejects r
        WHERE EXISTS (SELECT 1 FROM nodes n WHERE contains(r.source, n.node) OR contains(r.record, n.node))
          AND {explained} AND NOT contains(r.reason, '(value ')""", [pool, *EXPLAINED])
    return (int(row[0]), row[1] or "") if row else (0, "")


def fatal_hours(con: duckdb.DuckDBPyConnection, pool: str) -> pl.DataFrame:
    """The 1-hour buckets holding fatal error events: bucket, node, device, error_class, code, events."""
    return frame(con, """
        SELECT bucket, node, device,
               coalesce(json_extract_string(attributes, '$.error_class'), 'unknown') AS error_class,
               coalesce(json_extract_string(attributes, '$.code'), '') AS code, sum(sum) AS events
        FROM rollup_1h WHERE pool = ? AND metric = ? AND json_extract_string(attributes, '$.severity') = 'fatal'
          AND sum > 0
        GROUP BY ALL ORDER BY bucket, node, device""", [pool, ERRORS])


def hourly_memory(con: duckdb.DuckDBPyConnection, pool: str) -> pl.DataFrame:
    """Hourly mean HBM used per device: bucket, node, device, used (bytes)."""
    return frame(con, """
        SELECT bucket, node, device, sum(sum) / sum(count) AS used FROM rollup_1h
        WHERE pool = ? AND metric = ? AND device <> '' GROUP BY ALL ORDER BY node, device, bucket""", [pool, MEM_USED])


def routed_requests(con: duckdb.DuckDBPyConnection, pool: str) -> tuple[int, int | None]:
    """Observed requests the pool served, and the first one's arrival."""
    row = fetch_one(con, "SELECT count(*), min(arrival_ms) FROM requests WHERE obs_pool = ?", [pool])
    return (int(row[0]), None if row[1] is None else int(row[1])) if row else (0, None)


def last_gate_with(con: duckdb.DuckDBPyConnection, pool: str) -> dict[str, Any] | None:
    """The newest gated replay whose candidate sent requests to the pool: run_id, name, created_at, verdict, reasons."""
    rows = con.execute("SELECT run_id, name, created_at, verdict, reasons, summary FROM replay_runs "
                       "WHERE verdict IS NOT NULL ORDER BY run_id DESC LIMIT ?", [RUNS_SCANNED]).fetchall()
    for run_id, name, created, verdict, reasons, summary in rows:
        pools = (json.loads(summary).get("candidate") or {}).get("pools") or {}
        if (pools.get(pool) or {}).get("requests", 0) > 0:
            return {"run_id": int(run_id), "name": name, "created_at": created, "verdict": verdict,
                    "reasons": json.loads(reasons)}
    return None
