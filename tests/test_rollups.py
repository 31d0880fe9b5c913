"""Rollups equal the raw aggregation over the same buckets, stay exact across increments, and survive pruning."""

from __future__ import annotations

import random

import duckdb
import polars as pl
import pytest

from store import Held, IngestRun, commit_run
from store.rollups import HOUR_MS, MINUTE_MS, prune_raw, raw_horizon, refresh_rollups

T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z


def make(n: int, seed: int, start: int = T0, span_ms: int = 3 * HOUR_MS) -> pl.DataFrame:
    rng = random.Random(seed)
    ts = sorted({start + rng.randrange(0, span_ms // 1000) * 1000 for _ in range(n)})
    return pl.DataFrame({
        "ts": ts, "pool": "p", "node": [rng.choice(["n1", "n2"]) for _ in ts], "device": "0",
        "metric": "accelerator.power", "value": [round(rng.uniform(50, 700), 3) for _ in ts],
        "attributes": "{}",
    })


def ingest(con: duckdb.DuckDBPyConnection, batch: pl.DataFrame, source: str = "t") -> IngestRun:
    run = IngestRun("file", source)
    run.add_read(batch.height)
    run.add_samples(batch)
    commit_run(Held(con), run)
    return run


def expected(raw: pl.DataFrame, width: int) -> list[tuple]:
    """The aggregation computed in Python, independently of the SQL under test."""
    out = []
    groups = raw.with_columns((pl.col("ts") // width * width).alias("bucket")).sort("ts")
    for (bucket, node), g in groups.group_by(["bucket", "node"], maintain_order=True):
        v = g["value"].to_list()
        out.append((bucket, node, len(v), pytest.approx(sum(v) / len(v)), min(v), max(v), v[-1]))
    return sorted(out, key=lambda r: (r[0], r[1]))


def stored(con: duckdb.DuckDBPyConnection, table: str) -> list[tuple]:
    # avg is rounded: re-aggregation may add the same values in another order
    return con.execute(f"SELECT bucket, node, count, round(avg, 9), min, max, last FROM {table} "
                       "ORDER BY bucket, node").fetchall()


def test_rollups_equal_raw_aggregation(con: duckdb.DuckDBPyConnection) -> None:
    raw = make(4000, seed=1)
    ingest(con, raw)
    assert stored(con, "rollup_1m") == expected(raw, MINUTE_MS)
    assert stored(con, "rollup_1h") == expected(raw, HOUR_MS)
    assert len(stored(con, "rollup_1h")) == 6  # 3 hours x 2 nodes


def test_incremental_ingests_end_equal_to_one_ingest(con: duckdb.DuckDBPyConnection) -> None:
    raw = make(3000, seed=2)
    first = raw.filter(pl.col("ts") < T0 + 90 * MINUTE_MS + 20_000)  # cut inside a minute and an hour
    ingest(con, first, "a")
    ingest(con, raw, "b")  # overlaps: the first part is duplicates, the rest is new
    assert stored(con, "rollup_1m") == expected(raw, MINUTE_MS)
    assert stored(con, "rollup_1h") == expected(raw, HOUR_MS)


def test_refresh_touches_only_the_window(con: duckdb.DuckDBPyConnection) -> None:
    con.execute("INSERT INTO rollup_1m (bucket, pool, node, device, metric, attributes, count, sum, avg, min, "
                "max, last, last_ts) VALUES (0, 'x', 'x', 'x', 'x', '{}', 1, 1, 1, 1, 1, 1, 0)")
    ingest(con, make(100, seed=3))
    assert con.execute("SELECT count(*) FROM rollup_1m WHERE bucket = 0").fetchone() == (1,)
    assert refresh_rollups(con, T0 + 10 * HOUR_MS, T0 + 10 * HOUR_MS) == (0, 0)


def test_prune_keeps_rollups_and_refuses_older_samples(con: duckdb.DuckDBPyConnection) -> None:
    raw = make(3000, seed=4)
    ingest(con, raw)
    before_1m, before_1h = stored(con, "rollup_1m"), stored(con, "rollup_1h")
    now = T0 + 3 * HOUR_MS + 30 * MINUTE_MS
    deleted, horizon = prune_raw(con, keep_ms=2 * HOUR_MS, now_ms=now)
    assert horizon == T0 + HOUR_MS  # now - 2h = T0 + 1h30m, rounded down to the hour
    assert deleted == raw.filter(pl.col("ts") < horizon).height > 0
    assert con.execute("SELECT min(ts) >= ? FROM samples", [horizon]).fetchone() == (True,)
    assert stored(con, "rollup_1m") == before_1m and stored(con, "rollup_1h") == before_1h
    assert raw_horizon(con) == horizon
    assert prune_raw(con, keep_ms=2 * HOUR_MS, now_ms=now) == (0, horizon)  # again: nothing to do
    late = make(50, seed=5, span_ms=HOUR_MS).with_columns(pl.lit(1.0).alias("value"))
    run = ingest(con, late, "late")
    assert run.counts.rejected == late.height and run.counts.stored == 0
    reason = con.execute("SELECT DISTINCT reason FROM rejects WHERE source = 'late'").fetchall()
    assert reason == [(f"older than the raw retention horizon {horizon} ms (pruned by 'hetpool prune')",)]
    assert stored(con, "rollup_1m") == before_1m


def test_a_run_refreshes_only_its_own_nodes_and_the_result_is_the_same(con: duckdb.DuckDBPyConnection) -> None:
    raw = make(3000, seed=5)
    n1, n2 = raw.filter(pl.col("node") == "n1"), raw.filter(pl.col("node") == "n2")
    ingest(con, n1)
    before_n1 = [r for r in stored(con, "rollup_1m") if r[1] == "n1"]
    con.execute("UPDATE rollup_1m SET count = -1 WHERE node = 'n1'")  # a mark a refresh of n1 would erase
    ingest(con, n2)
    after = stored(con, "rollup_1m")
    assert {r[2] for r in after if r[1] == "n1"} == {-1}  # n2's run left n1's buckets alone
    assert [r for r in after if r[1] == "n2"] == [r for r in expected(raw, MINUTE_MS) if r[1] == "n2"]
    assert refresh_rollups(con, T0, T0 + 3 * HOUR_MS, nodes=["n1"])[0] == len(before_n1)
    assert stored(con, "rollup_1m") == expected(raw, MINUTE_MS)
    assert stored(con, "rollup_1h") == expected(raw, HOUR_MS)
