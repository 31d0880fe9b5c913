"""`hetpool serve` as an operator deploys it: collectors, console and health endpoint in one process tree;
SIGTERM stops all of it cleanly, and a kill -9 then a restart ends where an uninterrupted run ends."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

from app.commands.console import CONSOLE_LAUNCH
from collectors.prometheus import PullOptions, pull
from collectors.promhttp import PromClient
from pool_registry import load_registry
from store import Held, Store, connect, save_registry
from tests.conftest import FLEET, REPO
from tests.exporters import LiveExporter
from tests.loopback import Trickler
from tests.processes import free_port
from tests.promserver import STEP_S, FixtureFleet, PrometheusServer
from tests.test_feed import ROWS as FEED_ROWS
from tests.test_feed import TOKEN, key, samples

HOURS = 1
NOW_S = int(time.time()) // 3600 * 3600  # the history ends before the hour the tests run in
RECENT = FixtureFleet(hours=HOURS, t0_s=NOW_S - HOURS * 3600)


def serve(config: Path, db: Path) -> subprocess.Popen[str]:
    """`hetpool serve` in its own session, its log to a file: a pipe nobody reads while the test waits would fill
    and stall the service on its next log line."""
    log = db.with_name(f"{db.name}.serve-{time.monotonic_ns()}.log")
    with log.open("w") as sink:
        proc = subprocess.Popen([sys.executable, "-m", "app.cli", "--db", str(db), "serve", "--config", str(config)],
                                cwd=REPO, stdout=subprocess.DEVNULL, stderr=sink, text=True, start_new_session=True)
    proc.log = log  # type: ignore[attr-defined]
    return proc


def stopped(proc: subprocess.Popen[str], timeout_s: float = 60) -> str:
    """Wait for a service that was told to stop; its log."""
    proc.wait(timeout=timeout_s)
    return Path(proc.log).read_text()  # type: ignore[attr-defined]


def health(url: str) -> tuple[int, dict[str, object]] | None:
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as exc:
        return exc.code, json.load(exc)
    except OSError:
        return None


def wait_for(check: object, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():  # type: ignore[operator]
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def children(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").exists() and Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"


@pytest.fixture
def live() -> Iterator[LiveExporter]:
    e = LiveExporter()
    yield e
    e.close()


def test_serve_runs_collectors_console_and_health_and_sigterm_stops_them(fleet_db: Path, live: LiveExporter,
                                                                          tmp_path: Path) -> None:
    console_port, health_port = free_port(), free_port()
    config = tmp_path / "serve.yaml"
    config.write_text(f"console: {{port: {console_port}}}\nhealth: {{port: {health_port}}}\ncollectors:\n"
                      f"  - {{name: node, kind: scrape, url: '{live.url('/metrics')}', every: 1s}}\n")
    proc = serve(config, fleet_db)
    url = f"http://127.0.0.1:{health_port}/health"
    try:
        wait_for(lambda: (h := health(url)) is not None and h[0] == 200, 60, "a healthy report")
        wait_for(lambda: _ok(console_port), 60, "the console")
        streamlit = [c for c in children(proc.pid)  # Streamlit, started through the console's launcher
                     if str(CONSOLE_LAUNCH) in Path(f"/proc/{c}/cmdline").read_text()]
        assert len(streamlit) == 1
    finally:
        proc.send_signal(signal.SIGTERM)
        err = stopped(proc)
    assert proc.returncode == 0, err
    assert "stopping; runs under way finish or roll back" in err and "Traceback" not in err
    assert not alive(streamlit[0]) and not _ok(console_port) and health(url) is None
    with Store(fleet_db).read() as con:
        runs = con.execute("SELECT count(*), sum(read) - sum(stored + rejected + duplicates + ignored) "
                           "FROM ingest_runs WHERE kind = 'scrape'").fetchall()[0]
    assert runs[0] >= 1 and runs[1] == 0


def _ok(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2) as r:
            return r.read().strip() == b"ok"
    except OSError:
        return False


@pytest.fixture(scope="module")
def recent_prom(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusServer]:
    server = PrometheusServer(tmp_path_factory.mktemp("prom"), RECENT).start()
    yield server
    server.stop()


def digest(db: Path) -> tuple[int, str]:
    with Store(db).read() as con:  # through the gate, like every reader beside a running collector
        rows = con.execute("SELECT ts, pool, node, device, metric, value, attributes FROM samples "
                           "ORDER BY ALL").fetchall()
    return len(rows), hashlib.sha256(repr(rows).encode()).hexdigest()


@pytest.mark.slow  # kills and restarts a serving process under Prometheus
@pytest.mark.prometheus
def test_kill_9_then_restart_ends_as_an_uninterrupted_run(recent_prom: PrometheusServer, tmp_path: Path) -> None:
    clean_db = tmp_path / "clean.duckdb"
    con = connect(clean_db)
    save_registry(con, load_registry(FLEET), str(FLEET))
    pull(Held(con), PromClient(recent_prom.url),
         PullOptions(url=recent_prom.url, start_ms=RECENT.t0_s * 1000 - 1, end_ms=RECENT.end_s * 1000))
    con.close()
    clean = digest(clean_db)
    assert clean[0] > 5_000

    db = tmp_path / "k.duckdb"
    con = connect(db)
    save_registry(con, load_registry(FLEET), str(FLEET))
    con.close()
    config = tmp_path / "serve.yaml"
    # the service looks back from its own clock: from now, not from when this module was imported (the history
    # starts an hour before that hour began, so a fixed 'since' misses its first minutes once the clock has
    # passed the next hour, and the restarted pull never reaches the clean one)
    since_s = int(time.time()) - RECENT.t0_s + 1800
    config.write_text(f"console: {{enabled: false}}\nhealth: {{port: {free_port()}}}\ncollectors:\n"
                      f"  - {{name: prom, kind: prometheus, url: '{recent_prom.url}', every: {STEP_S}s, "
                      f"since: {since_s}s, chunk: 5m}}\n")

    def committed() -> int:
        with Store(db).read() as c:
            got = c.execute("SELECT count(*) FROM ingest_runs WHERE kind = 'prometheus' AND stored > 0").fetchall()
        return int(got[0][0])

    proc = serve(config, db)
    wait_for(lambda: committed() >= 10, 120, "ten committed chunks with data")
    os.killpg(proc.pid, signal.SIGKILL)  # the whole deployment, mid-pull, with no chance to clean up
    proc.wait(timeout=30)
    partial = digest(db)[0]
    assert 0 < partial < clean[0]
    proc = serve(config, db)
    caught_up = True
    try:
        wait_for(lambda: digest(db)[0] >= clean[0], 480, "the restarted pull to catch up")
    except AssertionError:
        caught_up = False
    finally:
        proc.send_signal(signal.SIGTERM)
        err = stopped(proc)
    # on a timeout, what the restarted service said is what tells a stall from a commit that keeps failing
    assert caught_up, f"timed out waiting for the restarted pull to catch up; it stored {digest(db)[0]} of " \
                      f"{clean[0]} samples; its log ends:\n{err[-4000:]}"
    assert proc.returncode == 0, err
    assert digest(db) == clean
    with Store(db).read() as c:
        assert c.execute("SELECT sum(read) - sum(stored + rejected + duplicates + ignored), count(*) FILTER "
                         "(WHERE status = 'running') FROM ingest_runs").fetchall() == [(0, 0)]


@pytest.fixture
def fed_db(fleet_db: Path) -> Path:
    """The example fleet and the feed's hand-planted samples (see tests/test_feed.py)."""
    con = connect(fleet_db)
    con.executemany("INSERT INTO samples (ts, pool, node, device, metric, value, attributes) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?)", FEED_ROWS)
    con.close()
    return fleet_db


def test_serve_runs_the_lake_export_and_the_feed_behind_its_token(fed_db: Path, tmp_path: Path) -> None:
    health_port, feed_port = free_port(), free_port()
    drop, lake = tmp_path / "drop", tmp_path / "lake"
    drop.mkdir()
    config = tmp_path / "serve.yaml"
    config.write_text(f"console: {{enabled: false}}\nhealth: {{port: {health_port}}}\n"
                      f"feed: {{port: {feed_port}}}\nexport: {{out: lake, every: 1h}}\n"
                      "collectors:\n  - {name: drop, kind: folder, path: drop}\n")
    env = {**os.environ, "HETPOOL_FEED_TOKEN": TOKEN}
    proc = subprocess.Popen([sys.executable, "-m", "app.cli", "--db", str(fed_db), "serve", "--config", str(config)],
                            cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    url, feed_url = f"http://127.0.0.1:{health_port}/health", f"http://127.0.0.1:{feed_port}/metrics"

    def exported() -> bool:
        h = health(url)
        return h is not None and h[0] == 200 and h[1]["export"]["last_ok_at"] is not None  # type: ignore[index]

    try:
        wait_for(exported, 60, "the first scheduled export")
        report = health(url)
        assert report is not None
        assert report[1]["export"]["last"] == {"rows": len(FEED_ROWS), "partitions_written": 3,  # type: ignore[index]
                                               "partitions_unchanged": 0, "partitions_kept": 0, "resolution": "raw"}
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(feed_url, timeout=10)
        assert refused.value.code == 401
        request = urllib.request.Request(feed_url, headers={"Authorization": f"Bearer {TOKEN}"})
        with urllib.request.urlopen(request, timeout=10) as r:
            served = samples(r.read().decode())
        assert served[key("accelerator_utilization_ratio", pool="h100-a", node="h100-a-01", device="nvidia0",
                          vendor="nvidia")] == 0.75
        assert served[key("accelerator_power_watts", pool="lab-x", node="box", device="d0", vendor="")] == 300.0
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "Traceback" not in err and TOKEN not in err and f"export: lake {lake} every 3600s" in err
    got = duckdb.sql(f"SELECT epoch_ms(ts), pool, node, device, metric, value, attributes FROM "
                     f"read_parquet('{lake}/**/*.parquet', hive_partitioning = true)").fetchall()
    # the lake's ts is a UTC timestamp and its attributes a map: the stored JSON text's pairs, keys sorted
    assert sorted((*r[:-1], list(r[-1].items())) for r in got) == sorted(
        (*r[:-1], sorted(json.loads(r[-1]).items())) for r in FEED_ROWS)
    assert sorted(str(p.relative_to(lake).parent) for p in lake.rglob("*.parquet")) == [
        "date=2026-11-30/pool=h100-a", "date=2026-11-30/pool=lab-x", "date=2026-11-30/pool=mi300x-a"]
    assert health(url) is None and not _answers(feed_url)


def _answers(url: str) -> bool:
    try:
        urllib.request.urlopen(url, timeout=2)
    except urllib.error.HTTPError:
        return True
    except OSError:
        return False
    return True


def test_serve_refuses_an_export_of_a_pool_nobody_knows(capsys: pytest.CaptureFixture[str], fleet_db: Path,
                                                        tmp_path: Path) -> None:
    from tests.test_ingest_file import run

    config = tmp_path / "serve.yaml"
    config.write_text("console: {enabled: false}\nhealth: {enabled: false}\nexport: {out: lake, pools: [h100-b]}\n"
                      "collectors:\n  - {name: drop, kind: folder, path: drop}\n")
    code, _, err = run(capsys, "--db", str(fleet_db), "serve", "--config", str(config))
    assert code == 2 and err.count("\n") == 1 and "unknown pool 'h100-b'; known: " in err
    assert not (tmp_path / "lake").exists()


@pytest.mark.slow
def test_sigterm_stops_serve_at_once_while_a_target_trickles(fleet_db: Path, tmp_path: Path) -> None:
    # a target that answers its headers, then one byte a second of a body that would take a day
    trickler = Trickler(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n", b"a" * 100_000, every_s=1.0,
                        for_s=120)
    config = tmp_path / "serve.yaml"
    config.write_text(f"console: {{enabled: false}}\nhealth: {{enabled: false}}\nfeed: {{enabled: false}}\n"
                      f"collectors:\n  - {{name: slow, kind: scrape, url: '{trickler.url}', every: 1s}}\n")
    proc = serve(config, fleet_db)
    try:
        wait_for(lambda: trickler.accepted >= 1, 60, "the scrape of the trickling target")
        time.sleep(0.5)
        began = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        err = stopped(proc, timeout_s=60)  # the runner's stop timeout: what a scrape that ignores the stop takes
        took = time.monotonic() - began
    finally:
        if proc.poll() is None:
            proc.kill()
        trickler.close()
    assert proc.returncode == 0 and "Traceback" not in err, err
    assert "did not stop in time" not in err, err
    assert took < 5, f"stopped after {took:.1f} s"  # not the scrape's 10 s deadline: the stop ends it
