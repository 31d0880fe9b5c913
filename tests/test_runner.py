"""Collectors run on their schedules; a collector that stores nothing, or falls behind, is not healthy."""

from __future__ import annotations

import json
import os
import re
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.serve.health import HealthServer, health_report
from collectors.service import DropFolder, Runner, ScrapeTarget, Status
from collectors.service.base import Outcome
from store import Store
from tests.conftest import REPO
from tests.exporters import LiveExporter


@pytest.fixture
def live() -> Iterator[LiveExporter]:
    e = LiveExporter()
    yield e
    e.close()


def get(url: str) -> tuple[int, dict[str, object]]:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as exc:
        return exc.code, json.load(exc)


def test_a_target_with_no_device_metrics_is_unhealthy_and_the_endpoint_says_so(fleet_db: Path,
                                                                               live: LiveExporter) -> None:
    store = Store(fleet_db)
    good = ScrapeTarget("h100-a-01", live.url("/metrics"), every_s=0.5, max_lag_s=2.0)
    runner = Runner(store, [good])
    health = HealthServer("127.0.0.1", 0, lambda: health_report(runner.statuses())).start()
    try:
        runner.run_once(good)
        code, body = get(f"{health.url}/health")
        assert code == 200 and body["status"] == "healthy" and body["problems"] == []
        live.serving = False  # the exporter is up, but serves no GPU (dcgm-exporter's /health still says 200)
        runner.run_once(good)
        time.sleep(2.1)
        code, body = get(f"{health.url}/health")
        assert code == 503 and body["status"] == "unhealthy"
        assert any("data lags" in p and "limit 2 s" in p for p in body["problems"]), body["problems"]
        fresh = Runner(store, [ScrapeTarget("empty", live.url("/metrics"), every_s=1, max_lag_s=60)])
        fresh.run_once(fresh.collectors[0])
        (status,) = fresh.statuses()
        assert not status["healthy"] and "has brought no data in 1 runs; the last read 1 samples and rejected 1" in str(
            status["problems"])
        assert get(f"{health.url}/metrics")[0] == 404
    finally:
        health.stop()


def test_the_runner_runs_on_schedule_and_stops_between_runs(fleet_db: Path, live: LiveExporter) -> None:
    store = Store(fleet_db)
    target = ScrapeTarget("h100-a-01", live.url("/metrics"), every_s=0.3)
    runner = Runner(store, [target])
    runner.start()
    time.sleep(1.5)
    assert runner.stop(timeout_s=10)
    (status,) = runner.statuses()
    assert 3 <= int(status["attempts"]) <= 7 and status["failures"] == 0  # type: ignore[call-overload]
    with store.read() as con:
        stored = con.execute("SELECT count(*) FROM samples").fetchall()[0][0]
    assert stored == status["total_stored"] and stored == len(live.expected_rows())


def test_failures_are_the_collectors_status_and_said_once(fleet_db: Path) -> None:
    lines: list[str] = []
    down = ScrapeTarget("down", "http://127.0.0.1:9/metrics", every_s=1)
    runner = Runner(Store(fleet_db), [down], log=lines.append)
    for _ in range(3):
        runner.run_once(down)
    (status,) = runner.statuses()
    assert status["failures"] == 3 and "connection refused" in str(status["last_error"])
    assert len(lines) == 1 and lines[0].startswith("down: cannot scrape http://127.0.0.1:9/metrics")


def test_a_drop_folder_ingests_complete_files_and_sets_bad_ones_aside(fleet_db: Path, tmp_path: Path) -> None:
    drop = tmp_path / "drop"
    drop.mkdir()
    good = drop / "dcgm.prom"
    good.write_bytes((REPO / "examples" / "exporters" / "dcgm-h100-a-01.prom").read_bytes())
    (drop / ".partial.prom").write_text("still being written")  # hidden names wait for their rename
    (drop / "notes.md").write_text("not an exposition file")
    (drop / "broken.prom.gz").write_bytes(b"\x1f\x8b not gzip at all")
    old = time.time() - 10
    for p in drop.iterdir():
        os.utime(p, (old, old))  # settled: written more than a moment ago
    folder = DropFolder("drop", drop, every_s=1)
    runner = Runner(Store(fleet_db), [folder])
    runner.run_once(folder)
    (status,) = runner.statuses()
    assert "1 file(s) moved to failed/: broken.prom.gz" in str(status["last_error"])
    assert sorted(p.name for p in (drop / "done").iterdir()) == ["dcgm.prom"]
    assert sorted(p.name for p in (drop / "failed").iterdir()) == ["broken.prom.gz", "broken.prom.gz.error.txt"]
    assert sorted(p.name for p in drop.iterdir() if p.is_file()) == [".partial.prom", "notes.md"]
    runner.run_once(folder)  # nothing new: a quiet folder is healthy
    assert runner.statuses()[0]["healthy"]


def test_health_rules_on_planted_statuses() -> None:
    s = Status("p", "prometheus", "pull", every_s=15, max_lag_s=90, started_at=1000.0)
    assert s.problems(1050.0) == []  # still within its first interval
    assert s.problems(1100.0) == ["has not finished a run yet"]
    s.last_run_at, s.last_ok_at, s.last_data_at, s.newest_ms = 1100.0, 1100.0, 1100.0, 1_095_000
    s.last = Outcome(read=10, stored=10)
    assert s.problems(1150.0) == []
    assert s.problems(1200.0) == ["data lags 105 s behind (limit 90 s)"]  # the watermark, not the last run
    s.last_error = "PullIncomplete: chunks missing"
    assert s.problems(1150.0) == ["last run failed: PullIncomplete: chunks missing"]


def test_a_recovery_is_logged_and_failures_since_the_last_success_restart(fleet_db: Path, live: LiveExporter) -> None:
    lines: list[str] = []
    target = ScrapeTarget("node", "http://127.0.0.1:9/metrics", every_s=1)
    runner = Runner(Store(fleet_db), [target], log=lines.append)
    runner.run_once(target)
    target.url = live.url("/metrics")
    runner.run_once(target)
    target.url = "http://127.0.0.1:9/metrics"
    runner.run_once(target)
    runner.run_once(target)
    (status,) = runner.statuses()
    assert (status["failures"], status["failures_since_success"]) == (3, 2)  # in all, and since it last worked
    target.url = live.url("/metrics")
    runner.run_once(target)
    (status,) = runner.statuses()
    assert (status["failures"], status["failures_since_success"]) == (3, 0)
    recovered = [line for line in lines if "recovered" in line]
    assert len(recovered) == 2 and recovered[0] == "node: recovered after 1 failed run(s)"
    assert recovered[1].startswith("node: recovered after 2 failed run(s) (last success 20")
    for key in ("last_run_at", "last_ok_at", "last_data_at"):  # ISO 8601 UTC, as an operator reads them
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", str(status[key])), status[key]


def test_folded_readings_are_not_called_duplicates_and_a_quiet_folder_is_not_late(fleet_db: Path,
                                                                                   tmp_path: Path) -> None:
    lines: list[str] = []
    drop = tmp_path / "drop"
    drop.mkdir()
    (drop / "dcgm.prom").write_bytes((REPO / "examples" / "exporters" / "dcgm-h100-a-01.prom").read_bytes())
    old = time.time() - 10
    os.utime(drop / "dcgm.prom", (old, old))
    folder = DropFolder("drop", drop, every_s=1)
    runner = Runner(Store(fleet_db), [folder], log=lines.append, clock=lambda: old + 20)
    runner.run_once(folder)
    (line,) = lines
    (status,) = runner.statuses()
    folded = status["last"]["folded"]  # type: ignore[index]
    assert folded > 0 and f"duplicates 0, folded {folded}," in line  # the XID at 0, folded: no row stored twice
    runner.clock = lambda: old + 2000  # much later, with nothing new in the folder
    runner.run_once(folder)
    (status,) = runner.statuses()
    assert status["lag_s"] == 0.0 and status["healthy"]
