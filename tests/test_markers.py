"""Severe error events and version changes to mark on the time series, on a hand-built store."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path

import duckdb
import polars as pl
import pytest

from store import Held, IngestRun, commit_run, connect
from store.rollups import HOUR_MS, MINUTE_MS, prune_raw
from store.views.markers import events_from_minutes, events_from_samples, severe_events, version_changes
from store.views.window import Window

T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z
W = Window(T0, T0 + 2 * HOUR_MS)


def event(ts: int, pool: str, node: str, device: str, code: str, severity: str, value: float = 1.0) -> tuple:
    attributes = json.dumps({"code": code, "error_class": "device_lost", "severity": severity}, sort_keys=True)
    return (ts, pool, node, device, "accelerator.errors", value, attributes, True)


@pytest.fixture(scope="module")
def marks_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("marks") / "marks.duckdb"
    con = connect(path)
    rows = [
        event(T0 + 65 * MINUTE_MS, "h100-a", "n2", "0", "79", "fatal"),
        event(T0 + 70 * MINUTE_MS, "h100-a", "n2", "1", "48", "fatal", 2.0),   # same 15-min bucket, other code
        event(T0 + 66 * MINUTE_MS, "h100-a", "n1", "0", "13", "recoverable"),  # not severe
        event(T0 + 10 * MINUTE_MS, "ascend-a", "n1", "", "8C084E00", "fatal"),  # node-wide
        event(T0 - MINUTE_MS, "h100-a", "n2", "0", "79", "fatal"),               # before the window
        event(T0 + 2 * HOUR_MS, "h100-a", "n2", "0", "79", "fatal"),             # at its (open) end
    ]
    raw = pl.DataFrame(rows, schema=["ts", "pool", "node", "device", "metric", "value", "attributes", "device_wide"],
                       orient="row")
    run = IngestRun("file", "hand-built")
    run.add_read(raw.height)
    run.add_samples(raw)
    run.add_versions(pl.DataFrame({
        "pool": ["h100-a"] * 5 + ["ascend-a"] * 2,
        "node": ["n1", "n1", "n2", "n1", "n1", "n1", "n1"],
        "device": ["", "", "", "0", "0", "", ""],
        "component": ["driver", "driver", "driver", "vbios", "vbios", "driver", "driver"],
        "version": ["550.144.03", "550.163.01", "550.144.03", "96.00.1", "96.00.2", "24.1", "24.2"],
        # n1's driver changes at 1 h; n2's never; n1/0's vbios at 30 min; ascend's driver before the window
        "ts": [T0 - HOUR_MS, T0 + HOUR_MS, T0, T0, T0 + 30 * MINUTE_MS, T0 - 3 * HOUR_MS, T0 - 2 * HOUR_MS]}))
    commit_run(Held(con), run)
    con.close()
    return path


@pytest.fixture
def ro(marks_db: Path) -> Iterator[duckdb.DuckDBPyConnection]:
    con = connect(marks_db, read_only=True)
    yield con
    con.close()


def test_severe_events_are_summed_per_bucket_pool_and_node_with_their_codes(ro: duckdb.DuckDBPyConnection) -> None:
    got = severe_events(ro, W, 15 * MINUTE_MS)
    assert got.rows() == [
        (T0, "ascend-a", "n1", "fatal", 1.0, "8C084E00"),
        (T0 + 60 * MINUTE_MS, "h100-a", "n2", "fatal", 3.0, "48, 79"),  # minutes 65 and 70 share a bucket
    ]


@pytest.mark.parametrize(("pools", "node", "device", "expected"), [
    (("h100-a",), None, None, [T0 + 60 * MINUTE_MS]),
    (("h100-a",), "n2", "0", [T0 + 60 * MINUTE_MS]),   # the device's own event only, the other is on device 1
    (("h100-a",), "n1", None, []),                      # a recoverable error is no mark
    (("ascend-a",), "n1", "3", [T0]),                   # a node-wide event marks every device of the node
])
def test_severe_events_of_one_node_or_device(ro: duckdb.DuckDBPyConnection, pools: tuple[str, ...],
                                             node: str | None, device: str | None, expected: list[int]) -> None:
    got = severe_events(ro, Window(W.start_ms, W.end_ms, pools), 15 * MINUTE_MS, node, device)
    assert got["t"].to_list() == expected
    if node == "n2" and device == "0":
        assert got["events"].to_list() == [1.0] and got["codes"].to_list() == ["79"]


@pytest.mark.parametrize(("window", "expected"), [
    # edges inside hours: the event at minute 65 is before the start, the one at 70 after it
    (Window(T0 + 66 * MINUTE_MS, T0 + 2 * HOUR_MS), [(T0 + 60 * MINUTE_MS, "h100-a", "n2", "fatal", 2.0, "48")]),
    # the end is open: minute 65 is left out, minute 10 is in; the two hours read are one span
    (Window(T0 + 5 * MINUTE_MS, T0 + 65 * MINUTE_MS), [(T0, "ascend-a", "n1", "fatal", 1.0, "8C084E00")]),
    (Window(T0 - HOUR_MS, T0), [(T0 - 15 * MINUTE_MS, "h100-a", "n2", "fatal", 1.0, "79")]),
    (Window(T0 + 20 * MINUTE_MS, T0 + 60 * MINUTE_MS), []),
])
def test_severe_events_of_windows_that_cut_hours(ro: duckdb.DuckDBPyConnection, window: Window,
                                                 expected: list[tuple[object, ...]]) -> None:
    assert severe_events(ro, window, 15 * MINUTE_MS).rows() == expected


def test_version_changes_are_the_new_versions_first_seen_in_the_window(ro: duckdb.DuckDBPyConnection) -> None:
    got = version_changes(ro, W)
    assert got.select("ts", "node", "device", "component", "previous", "version").rows() == [
        (T0 + 30 * MINUTE_MS, "n1", "0", "vbios", "96.00.1", "96.00.2"),
        (T0 + HOUR_MS, "n1", "", "driver", "550.144.03", "550.163.01"),
    ]  # n2 ran one driver; ascend's change happened before the window
    assert version_changes(ro, Window(T0 - 3 * HOUR_MS, T0, ("ascend-a",)))["version"].to_list() == ["24.2"]
    assert version_changes(ro, Window(W.start_ms, W.end_ms, ("h100-a",)), "n1", "0")["component"].to_list() == [
        "vbios", "driver"]  # a device sees its own and its node's changes
    assert version_changes(ro, W, "n2").is_empty()


def test_the_node_minutes_give_what_the_raw_samples_give(tmp_path: Path) -> None:
    rng = random.Random(5)
    rows = [event(T0 + rng.randrange(-HOUR_MS, 3 * HOUR_MS), rng.choice(["h100-a", "ascend-a"]),
                  rng.choice(["n1", "n2", "n3"]), rng.choice(["0", "1", ""]), rng.choice(["79", "48", "", "8C08"]),
                  rng.choice(["fatal", "critical", "recoverable"]), float(rng.randrange(0, 4))) for _ in range(400)]
    con = connect(tmp_path / "r.duckdb")
    raw = pl.DataFrame(rows, schema=["ts", "pool", "node", "device", "metric", "value", "attributes", "device_wide"],
                       orient="row")
    run = IngestRun("file", "random")
    run.add_read(raw.height)
    run.add_samples(raw)
    commit_run(Held(con), run)
    for w in (W, Window(T0 + 7 * MINUTE_MS, T0 + 99 * MINUTE_MS, ("h100-a",)), Window(T0 - HOUR_MS, T0 + 3 * HOUR_MS)):
        for step in (MINUTE_MS, 15 * MINUTE_MS, HOUR_MS):
            for node in (None, "n2"):
                got = events_from_minutes(con, w, step, node)
                assert got.height and got.rows() == events_from_samples(con, w, step, node).rows()
    # pruned raw history keeps its marks: they are read from the rollup
    before = severe_events(con, W, 15 * MINUTE_MS)
    prune_raw(con, keep_ms=HOUR_MS, now_ms=T0 + 4 * HOUR_MS)
    assert events_from_samples(con, W, 15 * MINUTE_MS).is_empty()
    assert severe_events(con, W, 15 * MINUTE_MS).rows() == before.rows() and before.height
    con.close()
