"""The Errors page's event table: raw samples read from the newest hours that hold enough events, same rows."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import duckdb
import polars as pl
import pytest

from pool_registry import Registry
from store import Held, IngestRun, commit_run, connect, save_registry
from store.rollups import HOUR_MS, MINUTE_MS
from store.views.reliability import error_events, events_since
from store.views.window import Window

T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z
FATAL = json.dumps({"code": "79", "error_class": "device_lost", "severity": "fatal"}, sort_keys=True,
                   separators=(",", ":"))
# (minute, pool, node, device): one event in hour 0, two in hour 1, three in hour 2 (two at one instant)
EVENTS = [(10, "h100-a", "n1", "0"), (70, "h100-a", "n2", "0"), (75, "ascend-a", "n1", "0"),
          (130, "h100-a", "n1", "1"), (170, "h100-a", "n1", "0"), (170, "ascend-a", "n2", "0")]


def rows() -> pl.DataFrame:
    out = [(T0 + m * MINUTE_MS, pool, node, dev, "accelerator.errors", 1.0, FATAL, True)
           for m, pool, node, dev in EVENTS]
    # a power sample every minute on one device: the other metrics the raw scan used to read
    out += [(T0 + m * MINUTE_MS, "h100-a", "n1", "0", "accelerator.power", 300.0, "{}", True) for m in range(180)]
    return pl.DataFrame(out, schema=["ts", "pool", "node", "device", "metric", "value", "attributes", "device_wide"],
                        orient="row")


@pytest.fixture(scope="module")
def ro(tmp_path_factory: pytest.TempPathFactory, fleet: Registry) -> Iterator[duckdb.DuckDBPyConnection]:
    path: Path = tmp_path_factory.mktemp("events") / "events.duckdb"
    con = connect(path)
    save_registry(con, fleet, "examples/fleet.yaml")
    raw = rows()
    run = IngestRun("file", "hand-built")
    run.add_read(raw.height)
    run.add_samples(raw)
    commit_run(Held(con), run)
    con.close()
    ro = connect(path, read_only=True)
    yield ro
    ro.close()


def newest(w: Window, limit: int) -> list[tuple[int, str, str, str]]:
    """The newest `limit` events of the window by hand: every event of the window, newest first, then place."""
    inside = [(T0 + m * MINUTE_MS, pool, node, dev) for m, pool, node, dev in EVENTS
              if w.start_ms <= T0 + m * MINUTE_MS < w.end_ms and (not w.pools or pool in w.pools)]
    return sorted(inside, key=lambda e: (-e[0], e[1], e[2], e[3]))[:limit]


H = HOUR_MS
WINDOWS = [  # window, limit, where the raw read starts (by hand from the hour counts 1, 2, 3)
    (Window(T0, T0 + 3 * H), 2, T0 + 2 * H),  # hour 2 alone holds 3 >= 2
    (Window(T0, T0 + 3 * H), 3, T0 + 2 * H),
    (Window(T0, T0 + 3 * H), 4, T0 + H),  # 3 + 2
    (Window(T0, T0 + 3 * H), 6, T0),  # 3 + 2 + 1
    (Window(T0, T0 + 3 * H), 500, T0),  # fewer events than the limit: the whole window
    (Window(T0 + 30 * MINUTE_MS, T0 + 3 * H - MINUTE_MS), 2, T0 + H),  # hour 2 is cut by the end: hour 1 counts
    (Window(T0 + 30 * MINUTE_MS, T0 + 3 * H - MINUTE_MS), 3, T0 + 30 * MINUTE_MS),
    (Window(T0, T0 + 3 * H, ("ascend-a",)), 1, T0 + 2 * H),  # only the pools in view count
    (Window(T0, T0 + 3 * H, ("ascend-a",)), 2, T0 + H),
    (Window(T0 + H, T0 + 2 * H), 1, T0 + H),
    (Window(T0 + 3 * H, T0 + 4 * H), 1, T0 + 3 * H),  # no events at all
]


@pytest.mark.parametrize(("w", "limit", "since"), WINDOWS)
def test_the_table_reads_from_the_newest_hours_holding_the_limit_and_lists_the_same_rows(
        ro: duckdb.DuckDBPyConnection, w: Window, limit: int, since: int) -> None:
    assert events_since(ro, w, limit) == since
    got = error_events(ro, w, limit)
    assert got.select("ts", "pool", "node", "device").rows() == newest(w, limit)
    assert got["count"].to_list() == [1.0] * len(got) and set(got["code"]) <= {"79"}
