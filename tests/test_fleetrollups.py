"""The fleet rollups hold the hand-computed device and node aggregates, stay equal to a rebuild from rollup_1m
across overlapping and node-by-node ingests, and the migration fills them for a database stored before it."""

from __future__ import annotations

import json
import random
from importlib import resources

import duckdb
import polars as pl
import pytest

from store import Held, IngestRun, commit_run
from store.fleetrollups import (
    BUSY_UTIL,
    CLOCK,
    ERRORS,
    FLEET_TABLES,
    HEALTH,
    HOUR_COLUMNS,
    NODE_METRICS,
    SEVERE,
    UTIL,
)
from store.rollups import HOUR_MS, MINUTE_MS, prune_raw

T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z
POWER, TEMP = "accelerator.power", "accelerator.temperature"


def rows(*samples: tuple[int, str, str, str, float, bool]) -> pl.DataFrame:
    """(ms after T0, node, device, metric, value, device_wide) as canonical rows; node n3 is pool q's, others p's."""
    return pl.DataFrame({
        "ts": [T0 + s[0] for s in samples], "pool": ["q" if s[1] == "n3" else "p" for s in samples],
        "node": [s[1] for s in samples],
        "device": [s[2] for s in samples], "metric": [s[3] for s in samples],
        "value": [s[4] for s in samples], "attributes": "{}", "device_wide": [s[5] for s in samples]})


def ingest(con: duckdb.DuckDBPyConnection, batch: pl.DataFrame, source: str = "t") -> None:
    run = IngestRun("file", source)
    run.add_read(batch.height)
    run.add_samples(batch)
    commit_run(Held(con), run)


def table(con: duckdb.DuckDBPyConnection, name: str) -> list[tuple[object, ...]]:
    # means rounded: a rebuild may add the same values in another order
    cols = {"device_minutes": "bucket, pool, node, device, round(clock, 6), round(util, 9)",
            "device_hours": "bucket, pool, node, device, minutes, busy, round(max_clock, 6), "
                            + ", ".join(f"round({c}, 6)" for c, _, _ in HOUR_COLUMNS) + ", last_ts, seen_ts",
            "node_1m": "bucket, pool, node, metric, count, round(sum, 6)",
            "node_1h": "bucket, pool, node, metric, count, round(sum, 6)",
            "pool_1m": "bucket, pool, metric, count, round(sum, 6)",
            "pool_1h": "bucket, pool, metric, count, round(sum, 6)",
            "node_events_1m": "bucket, pool, node, severity, code, events"}[name]
    return con.execute(f"SELECT {cols} FROM {name} ORDER BY ALL").fetchall()


def test_the_fleet_rollups_hold_the_hand_computed_aggregates(con: duckdb.DuckDBPyConnection) -> None:
    m = MINUTE_MS
    ingest(con, rows(
        (0, "n1", "0", CLOCK, 1.9e9, True), (30_000, "n1", "0", CLOCK, 1.7e9, True),  # minute 0 mean 1.8 GHz
        (0, "n1", "0", UTIL, 0.6, True), (30_000, "n1", "0", UTIL, 0.3, True),          # mean 0.45: not busy
        (m, "n1", "0", UTIL, 0.5, True),                                                 # busy, no clock
        (m, "n1", "0", CLOCK, 9.9e9, False),               # a component clock: no device view reads it
        (0, "n1", "1", UTIL, 0.9, True), (0, "n1", "1", CLOCK, 1.2e9, True),
        (0, "n1", "0", POWER, 300.0, True), (0, "n1", "1", POWER, 500.0, True), (30_000, "n1", "1", POWER, 700.0, True),
        (HOUR_MS, "n2", "0", TEMP, 60.0, True), (HOUR_MS, "n2", "", TEMP, 40.0, True),  # a node-wide sensor
        (0, "n1", "0", HEALTH, 1.0, True), (45_000, "n1", "0", HEALTH, 0.0, True),
        (2 * m, "n1", "1", ERRORS, 1.0, True),
    ))
    assert table(con, "device_minutes") == [
        (T0, "p", "n1", "0", 1.8e9, 0.45), (T0, "p", "n1", "1", 1.2e9, 0.9), (T0 + m, "p", "n1", "0", None, 0.5)]
    hours = con.execute("SELECT node, device, minutes, busy, max_clock, util_sum / util_count, "
                        "clock_sum / clock_count, power_sum / power_count, temp_max, health_last, health_ts, last_ts, "
                        "seen_ts FROM device_hours ORDER BY ALL").fetchall()
    assert [tuple(pytest.approx(v) if isinstance(v, float) else v for v in r) for r in hours] == [
        # n1/0: minute 0 at 0.45 is idle, minute 1 at 0.5 busy; the last health reading is 0 at 45 s; its newest
        # sample is the component clock's at 60 s
        ("n1", "0", 2, 1, 1.8e9, 1.4 / 3, 1.8e9, 300.0, None, 0.0, T0 + 45_000, T0 + m, T0 + m),
        # n1/1: its error event at 120 s is seen but is not an accelerator reading
        ("n1", "1", 1, 1, 1.2e9, 0.9, 1.2e9, 600.0, None, None, None, T0 + 30_000, T0 + 2 * m),
        ("n2", "", 0, 0, None, None, None, None, 40.0, None, None, T0 + HOUR_MS, T0 + HOUR_MS),
        ("n2", "0", 0, 0, None, None, None, None, 60.0, None, None, T0 + HOUR_MS, T0 + HOUR_MS)]
    assert table(con, "node_1m") == [
        (T0, "p", "n1", CLOCK, 3, 4.8e9), (T0, "p", "n1", POWER, 3, 1500.0), (T0, "p", "n1", UTIL, 3, 1.8),
        (T0 + m, "p", "n1", UTIL, 1, 0.5), (T0 + HOUR_MS, "p", "n2", TEMP, 1, 60.0)]
    assert table(con, "node_1h") == [
        (T0, "p", "n1", CLOCK, 3, 4.8e9), (T0, "p", "n1", POWER, 3, 1500.0), (T0, "p", "n1", UTIL, 4, 2.3),
        (T0 + HOUR_MS, "p", "n2", TEMP, 1, 60.0)]
    assert table(con, "pool_1h") == [
        (T0, "p", CLOCK, 3, 4.8e9), (T0, "p", POWER, 3, 1500.0), (T0, "p", UTIL, 4, 2.3),
        (T0 + HOUR_MS, "p", TEMP, 1, 60.0)]


def test_the_node_minutes_hold_the_severe_events_per_severity_and_code(con: duckdb.DuckDBPyConnection) -> None:
    m = MINUTE_MS
    ingest(con, error_rows([
        (0, "n1", "0", "79", "fatal", 1.0), (30_000, "n1", "1", "79", "fatal", 2.0),  # one node-minute: 3 events
        (30_000, "n1", "0", "48", "critical", 1.0),      # another severity: its own row
        (m, "n1", "0", "13", "recoverable", 5.0),        # not severe
        (m, "n2", "", "8C08", "fatal", 0.0),             # no event
        (2 * m, "n3", "0", "79", "fatal", 1.0),
    ]))
    assert table(con, "node_events_1m") == [
        (T0, "p", "n1", "critical", "48", 1.0), (T0, "p", "n1", "fatal", "79", 3.0),
        (T0 + 2 * m, "q", "n3", "fatal", "79", 1.0)]
    sql = resources.files("store.migrations").joinpath("0011_node_events.sql").read_text(encoding="utf-8")
    assert all(f"'{s}'" in sql for s in SEVERE)  # the migration's fill names the same severities


def fleet(n: int, seed: int) -> pl.DataFrame:
    """Random samples of the node metrics (and one they leave out) over three hours, three nodes, two devices,
    and error events of every severity; values are multiples of 1/1024, so every sum is exact in any order."""
    rng = random.Random(seed)
    ts = sorted({rng.randrange(0, 3 * HOUR_MS // 1000) * 1000 for _ in range(n)})
    metrics = [*NODE_METRICS, "accelerator.health"]
    gauges = rows(*((t, rng.choice(["n1", "n2", "n3"]), rng.choice(["0", "1"]), rng.choice(metrics),
                     rng.randrange(0, 1025) / 1024 * (2e9 if rng.random() < 0.5 else 1.0), rng.random() < 0.9)
                    for t in ts))
    events = [(t, rng.choice(["n1", "n2", "n3"]), rng.choice(["0", "1", ""]), rng.choice(["79", "48", "8C08"]),
               rng.choice([*SEVERE, "recoverable"]), float(rng.randrange(0, 3))) for t in ts[::7]]
    return pl.concat([gauges, error_rows(events)])


def error_rows(events: list[tuple[int, str, str, str, str, float]]) -> pl.DataFrame:
    """(ms after T0, node, device, code, severity, events) as canonical error-event rows."""
    frame = rows(*((e[0], e[1], e[2], ERRORS, e[5], True) for e in events))
    return frame.with_columns(pl.Series("attributes", [
        json.dumps({"code": e[3], "error_class": "device_lost", "severity": e[4]}, sort_keys=True) for e in events]))


def rebuilt(con: duckdb.DuckDBPyConnection) -> dict[str, list[tuple[object, ...]]]:
    """Each fleet table as the migration's statements build it from rollup_1m, in a rolled-back transaction."""
    sql = "".join(resources.files("store.migrations").joinpath(name).read_text(encoding="utf-8")
                  for name in ("0009_fleet_rollups.sql", "0010_pool_rollups.sql", "0011_node_events.sql"))
    fills = [s for s in sql.split(";") if s.strip() and "INSERT INTO" in s]
    con.execute("BEGIN TRANSACTION")
    try:
        for name in FLEET_TABLES:
            con.execute(f"DELETE FROM {name}")
        for statement in fills:
            con.execute(statement)
        return {name: table(con, name) for name in FLEET_TABLES}
    finally:
        con.execute("ROLLBACK")


def test_ingests_node_by_node_and_overlapping_leave_what_a_rebuild_builds(con: duckdb.DuckDBPyConnection) -> None:
    raw = fleet(5000, seed=11)
    for node in ("n1", "n2"):
        ingest(con, raw.filter(pl.col("node") == node), node)
    ingest(con, raw.filter(pl.col("ts") >= T0 + 70 * MINUTE_MS + 15_000), "tail")  # overlaps: n3 is new
    got = {name: table(con, name) for name in FLEET_TABLES}
    assert all(got.values()) and got == rebuilt(con)
    assert [r[:7] for r in got["device_hours"] if r[4]] == sorted(
        (h, "q" if n == "n3" else "p", n, d, len(us), sum(1 for u in us if u >= BUSY_UTIL), c)
        for (h, n, d), (us, c) in _per_device_hour(got["device_minutes"]).items())


def _per_device_hour(minutes: list[tuple[object, ...]]) -> dict[tuple[int, str, str], tuple[list[float], object]]:
    """Per device-hour, independently of the SQL: its minutes' utilizations (NaN for none) and its top clock."""
    out: dict[tuple[int, str, str], tuple[list[float], object]] = {}
    for bucket, _, node, device, clock, util in minutes:
        key = (int(str(bucket)) // HOUR_MS * HOUR_MS, str(node), str(device))
        us, best = out.get(key, ([], None))
        us.append(float("nan") if util is None else float(str(util)))
        if clock is not None and (best is None or float(str(clock)) > float(str(best))):
            best = clock
        out[key] = (us, best)
    return out


def test_pruning_keeps_the_fleet_rollups(con: duckdb.DuckDBPyConnection) -> None:
    ingest(con, fleet(2000, seed=12))
    before = {name: table(con, name) for name in FLEET_TABLES}
    prune_raw(con, keep_ms=HOUR_MS, now_ms=T0 + 3 * HOUR_MS)
    assert {name: table(con, name) for name in FLEET_TABLES} == before


@pytest.mark.parametrize("name", FLEET_TABLES)
def test_the_migration_fills_a_table_stored_before_it(con: duckdb.DuckDBPyConnection, name: str) -> None:
    ingest(con, fleet(1500, seed=13))
    assert table(con, name) and rebuilt(con)[name] == table(con, name)
