"""The demo builder in parts: requests served chunk by chunk, requests stored run by run, progress all along."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from app.demo.build import STORY_SHARE, DemoSpec, build_demo, ingest_requests
from app.demo.chunks import ROW_COLUMNS, chunk_edges, replay_in_chunks
from app.demo.story import layout, scale_registry
from app.demo.traffic import demo_candidate, draw_traffic, planted_registry
from pool_registry import Registry
from replay import Candidate, run_replay
from store import Held, connect
from tests.conftest import FLEET

END_MS = int(dt.datetime(2026, 11, 29, 8, tzinfo=dt.UTC).timestamp() * 1000)
HOUR_MS = 3_600_000


@pytest.mark.parametrize(("start", "end", "chunk", "edges"), [
    (0, 10, 4, [(0, 4), (4, 8), (8, 10)]),
    (0, 8, 4, [(0, 4), (4, 8)]),
    (5, 6, 4, [(5, 6)]),
])
def test_chunks_cover_the_window_once(start: int, end: int, chunk: int, edges: list[tuple[int, int]]) -> None:
    assert chunk_edges(start, end, chunk) == edges


def _traffic(fleet: Registry, hours: int) -> tuple[pl.DataFrame, Candidate, Registry, int]:
    layouts = layout(scale_registry(fleet, 2))
    planted, candidate = planted_registry(layouts), demo_candidate(layouts)
    start = END_MS - hours * HOUR_MS
    traffic = draw_traffic(layouts, planted, candidate, np.random.default_rng(7), start, END_MS).drop("code")
    return traffic, candidate, planted, start


def test_served_in_chunks_every_request_once_as_the_whole_window_would_be(fleet: Registry) -> None:
    traffic, candidate, planted, start = _traffic(fleet, 4)
    whole = run_replay(candidate, traffic, planted, seed=0)
    parts = replay_in_chunks(candidate, traffic, planted, start, END_MS, chunk_ms=HOUR_MS // 4)
    rows = parts.requests
    assert rows["seq"].to_list() == list(range(traffic.height))  # each request once, in the traffic's order
    assert rows["arrival_ms"].equals(traffic["arrival_ms"])
    # a chunk's replay starts 10 minutes early and runs 10 minutes on, so its replicas are as loaded as in one
    # replay of the window: every request on the same replica with the same TTFT (without the overlap, 7 of
    # these 7,334 requests are not)
    assert rows["replica"].equals(whole.requests["replica"])
    assert np.allclose(rows["ttft_s"].to_numpy(), whole.requests["ttft_s"].to_numpy(), rtol=1e-9, atol=0)
    # busy spans: inside the window, never overlapping on a replica, as long in all as the one replay's
    busy = parts.busy.sort("pool", "replica", "start_ms")
    assert busy["start_ms"].min() >= start and busy["end_ms"].max() <= END_MS  # type: ignore[operator]
    gaps = busy.with_columns(prev=pl.col("end_ms").shift(1).over("pool", "replica")).drop_nulls("prev")
    assert (gaps["start_ms"] >= gaps["prev"]).all()
    clipped = whole.busy.with_columns(pl.col("end_ms").clip(upper_bound=END_MS))
    assert busy.select((pl.col("end_ms") - pl.col("start_ms")).sum()).item() == pytest.approx(
        clipped.select((pl.col("end_ms") - pl.col("start_ms")).sum()).item(), rel=0.01)


def test_one_chunk_is_the_replay_itself(fleet: Registry) -> None:
    traffic, candidate, planted, start = _traffic(fleet, 2)
    whole = run_replay(candidate, traffic, planted, seed=0)
    parts = replay_in_chunks(candidate, traffic, planted, start, END_MS)
    assert parts.requests.equals(whole.requests.select(*ROW_COLUMNS, "images"))


def test_requests_stored_in_parts_are_numbered_as_one_file(tmp_path: Path) -> None:
    frame = pl.DataFrame({"arrival_ms": [1_764_000_000_000 + 1_000 * i for i in range(7)],
                          "in_tokens": [10 + i for i in range(7)],
                          "out_tokens": [5] * 7, "cached_tokens": [0] * 7, "sla_tier": ["standard"] * 7,
                          "model": ["m"] * 7, "obs_pool": ["h100-a"] * 7, "obs_ttft_s": [0.1] * 7,
                          "obs_e2e_s": [0.5] * 7, "outcome": ["ok"] * 7})
    con = connect(tmp_path / "r.duckdb")
    try:
        assert ingest_requests(Held(con), frame, "test", rows_per_run=3) == (7, 3)  # parts of 3, 3 and 1
        assert con.sql("SELECT seq, in_tokens FROM requests ORDER BY seq").fetchall() == [
            (i, 10 + i) for i in range(7)]
        assert con.sql("SELECT count(*), sum(read) FROM ingest_runs WHERE kind = 'traffic'").fetchall() == [(3, 7)]
        assert ingest_requests(Held(con), frame, "test", rows_per_run=4) == (0, 2)  # again: nothing twice
        assert con.sql("SELECT count(*) FROM requests").fetchall() == [(7,)]
    finally:
        con.close()


@pytest.mark.slow  # a real build of seven hours
def test_the_story_moves_the_progress_bar_from_the_start(fleet: Registry, tmp_path: Path) -> None:
    heard: list[tuple[float, str]] = []
    con = connect(tmp_path / "demo.duckdb")
    try:
        spec = DemoSpec(end_ms=END_MS, days=7 / 24, devices_per_pool=2)
        build_demo(Held(con), fleet, spec, str(FLEET), lambda f, what: heard.append((f, what)))
    finally:
        con.close()
    fractions = [f for f, _ in heard]
    assert fractions == sorted(fractions) and fractions[0] == 0.0 and fractions[-1] == 1.0
    story = [(f, what) for f, what in heard if f < STORY_SHARE]
    labels = [what for _, what in story]
    # each pool's devices, both chunks of the requests (6 h, then 1 h), each node's engine counters
    for pool in ("h100-a", "mi300x-a", "ascend-a", "gaudi3-a", "mlu370-a"):
        assert f"drawing {pool}'s devices" in labels
    assert "serving requests, part 1 of 2" in labels and "serving requests, part 2 of 2" in labels
    assert any(what.startswith("engine counters of h100-a-") for what in labels)
    steps = sorted({f for f, _ in story})
    assert len(steps) >= 5 + 2 + 10 and steps[1] <= 0.05  # advancing from the first pool's devices on
    assert max(np.diff(steps)) < STORY_SHARE / 2  # no step of the story holds the bar for long
