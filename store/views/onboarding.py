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

from canonical.metrics import ERRORS
from store.views.health import MEM_USED
from store.views.window import frame

EXPLAINED = ("value ", "duplicate series")  # reject reasons of values that were read and refused
RUNS_SCANNED = 200
# Every question is asked of many pools at once, one query each, so that tracking 10,000 pools costs a few
# queries rather than 90,000; the one-pool answers are the same queries with a list of one.
POOLS = "SELECT unnest(?::VARCHAR[])"


def pool_spans(con: duckdb.DuckDBPyConnection, pools: tuple[str, ...]) -> dict[str, tuple[int | None, int | None]]:
    """(first, newest) sample time of each pool, from the hourly rollup."""
    rows = con.execute(f"SELECT pool, min(bucket), max(last_ts) FROM rollup_1h WHERE pool IN ({POOLS}) GROUP BY pool",
                       [list(pools)]).fetchall()
    found = {r[0]: (int(r[1]), int(r[2])) for r in rows if r[1] is not None}
    return {p: found.get(p, (None, None)) for p in pools}



def _frames(con: duckdb.DuckDBPyConnection, sql: str, pools: tuple[str, ...],
            params: list[object]) -> dict[str, pl.DataFrame]:
    """A query with a leading pool column, split into one frame per pool (empty, with the columns, for none)."""
    whole = frame(con, sql, [list(pools), *params])
    parts = whole.partition_by("pool", as_dict=True, include_key=False, maintain_order=True)
    empty = whole.clear().drop("pool")
    return {p: parts.get((p,), empty) for p in pools}


def metrics_seen(con: duckdb.DuckDBPyConnection, pools: tuple[str, ...]) -> dict[str, pl.DataFrame]:
    """Each pool's canonical metrics: the hour each first arrived and how many devices sent it."""
    return _frames(con, f"""
        SELECT pool, metric, min(bucket) AS first_ms,
               count(DISTINCT (node, device)) FILTER (WHERE device <> '') AS devices
        FROM rollup_1h WHERE pool IN ({POOLS}) GROUP BY pool, metric ORDER BY pool, metric""", pools, [])



def devices_heard(con: duckdb.DuckDBPyConnection, pools: tuple[str, ...]) -> dict[str, int]:
    """Distinct devices of each pool that sent an accelerator metric."""
    rows = con.execute(f"SELECT pool, count(DISTINCT (node, device)) FROM rollup_1h WHERE pool IN ({POOLS}) "
                       "AND device <> '' AND metric LIKE 'accelerator.%' GROUP BY pool", [list(pools)]).fetchall()
    found = {r[0]: int(r[1]) for r in rows}
    return {p: found.get(p, 0) for p in pools}



def unexplained_rejects(con: duckdb.DuckDBPyConnection, pools: tuple[str, ...]) -> dict[str, tuple[int, str]]:
    """For each pool: how many rejects of its nodes are unexplained (see the module doc), and one as an example."""
    explained = " AND ".join("NOT starts_with(reason, ?)" for _ in EXPLAINED)
    rows = con.execute(f"""
        WITH nodes AS (SELECT DISTINCT pool, node FROM rollup_1h WHERE pool IN ({POOLS})),
        bad AS (SELECT rowid AS rid, source, record, reason FROM rejects
                WHERE {explained} AND NOT contains(reason, '(value ')),
        hits AS (SELECT DISTINCT n.pool, b.rid, b.reason FROM bad b JOIN nodes n
                 ON contains(b.source, n.node) OR contains(b.record, n.node))
        SELECT pool, count(*), arg_min(reason, rid) FROM hits GROUP BY pool""", [list(pools), *EXPLAINED]).fetchall()
    found = {r[0]: (int(r[1]), r[2] or "") for r in rows}
    return {p: found.get(p, (0, "")) for p in pools}



def fatal_hours(con: duckdb.DuckDBPyConnection, pools: tuple[str, ...]) -> dict[str, pl.DataFrame]:
    """Each pool's 1-hour buckets holding fatal error events: bucket, node, device, error_class, code, events."""
    return _frames(con, f"""
        SELECT pool, bucket, node, device,
               coalesce(json_extract_string(attributes, '$.error_class'), 'unknown') AS error_class,
               coalesce(json_extract_string(attributes, '$.code'), '') AS code, sum(sum) AS events
        FROM rollup_1h WHERE pool IN ({POOLS}) AND metric = ?
          AND json_extract_string(attributes, '$.severity') = 'fatal' AND sum > 0
        GROUP BY ALL ORDER BY pool, bucket, node, device""", pools, [ERRORS])



def hourly_memory(con: duckdb.DuckDBPyConnection, pools: tuple[str, ...]) -> dict[str, pl.DataFrame]:
    """Each pool's hourly mean HBM used per device: bucket, node, device, used (bytes)."""
    return _frames(con, f"""
        SELECT pool, bucket, node, device, sum(sum) / sum(count) AS used FROM rollup_1h
        WHERE pool IN ({POOLS}) AND metric = ? AND device <> '' GROUP BY ALL ORDER BY pool, node, device, bucket""",
                   pools, [MEM_USED])



def routed_requests(con: duckdb.DuckDBPyConnection, pools: tuple[str, ...]) -> dict[str, tuple[int, int | None]]:
    """Observed requests each pool served, and the first one's arrival."""
    rows = con.execute(f"SELECT obs_pool, count(*), min(arrival_ms) FROM requests WHERE obs_pool IN ({POOLS}) "
                       "GROUP BY obs_pool", [list(pools)]).fetchall()
    found = {r[0]: (int(r[1]), None if r[2] is None else int(r[2])) for r in rows}
    return {p: found.get(p, (0, None)) for p in pools}



def last_gate_with(con: duckdb.DuckDBPyConnection, pools: tuple[str, ...]) -> dict[str, dict[str, Any] | None]:
    """For each pool, the newest gated replay whose candidate sent requests to it: run_id, name, created_at,
    verdict, reasons (None when none of the last runs did)."""
    rows = con.execute("SELECT run_id, name, created_at, verdict, reasons, summary FROM replay_runs "
                       "WHERE verdict IS NOT NULL ORDER BY run_id DESC LIMIT ?", [RUNS_SCANNED]).fetchall()
    out: dict[str, dict[str, Any] | None] = dict.fromkeys(pools)
    for run_id, name, created, verdict, reasons, summary in rows:  # newest first: the first run found stays
        served = (json.loads(summary).get("candidate") or {}).get("pools") or {}
        for pool, stats in served.items():
            if pool in out and out[pool] is None and (stats or {}).get("requests", 0) > 0:
                out[pool] = {"run_id": int(run_id), "name": name, "created_at": created, "verdict": verdict,
                             "reasons": json.loads(reasons)}
    return out

