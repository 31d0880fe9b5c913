"""Always on: a real Prometheus scrapes a live exporter, `hetpool serve` follows it and scrapes the exporter too,
the console renders again and again, and CLI commands run in a loop, all on one database at the same time.

Every command must exit 0, no output may carry a lock error, every run must account for what it read, and the
stored rows must be exactly what the exporter served. The lock waits each side saw go to test-artifacts/.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from store import ENV_DB, Store
from store.locks import STATS
from tests.conftest import REPO
from tests.exporters import LIVE_METRICS, LiveExporter
from tests.processes import free_port
from tests.promserver import PrometheusServer

pytestmark = [pytest.mark.prometheus, pytest.mark.slow]

SOAK_S = float(os.environ.get("HETPOOL_SOAK_S", "60"))
NODE = "h100-a-07"  # a node of the example fleet that nothing else in the test writes
LOCK_ERRORS = re.compile(r"Conflicting lock|Could not set lock|ResourceInUse|different configuration|-readonly",
                         re.IGNORECASE)
MAIN = str(REPO / "app" / "console" / "main.py")
PAGES = ("screens/health.py", "screens/reliability.py", "screens/cost.py", "screens/export.py",
         "screens/collectors.py")
ARTIFACTS = REPO / "test-artifacts"


@pytest.fixture
def live() -> Iterator[LiveExporter]:
    e = LiveExporter(node=NODE)
    yield e
    e.close()


def hetpool(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HETPOOL_LOCK_STATS": "1"}
    return subprocess.run([sys.executable, "-m", "app.cli", "--db", str(db), *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300)


def worst_wait(stderr: str) -> float:
    found = re.findall(r"longest wait ([\d.]+) s", stderr)
    return float(found[-1]) if found else 0.0


def test_everything_at_once_on_one_database(fleet_db: Path, live: LiveExporter, tmp_path: Path) -> None:
    trace = tmp_path / "traffic.csv"
    trace.write_text("arrival_ms,in_tokens,out_tokens,model\n" + "".join(
        f"{1_764_000_000_000 + i * 250},{200 + i % 900},{50 + i % 300},llama-3.1-70b\n" for i in range(400)))
    assert hetpool(fleet_db, "ingest", "traffic", str(trace)).returncode == 0
    prom = PrometheusServer(tmp_path / "prom", None, targets=(live.url("").split("//")[1],), interval="1s")
    prom.workdir.mkdir()
    prom.start()
    health_port, console_port = free_port(), free_port()
    config = tmp_path / "serve.yaml"
    config.write_text(
        f"console: {{port: {console_port}}}\nhealth: {{port: {health_port}}}\ncollectors:\n"
        f"  - {{name: prom, kind: prometheus, url: '{prom.url}', every: 1s, since: 2m, profiles: [dcgm]}}\n"
        f"  - {{name: exporter, kind: scrape, url: '{live.url('/metrics')}', every: 1s}}\n")
    served = subprocess.Popen([sys.executable, "-m", "app.cli", "--db", str(fleet_db), "serve", "--config",
                               str(config)], cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                              env={**os.environ, "HETPOOL_LOCK_STATS": "1"}, start_new_session=True)
    stop = threading.Event()
    cli: list[tuple[str, int, str, float]] = []
    commands = [
        ("replay run", ["replay", "run", "--candidate", "examples/candidates/sla_cost.yaml", "--baseline",
                        "examples/candidates/round_robin.yaml"]),
        ("export", ["export", "--format", "csv", "--out", str(tmp_path / "feed.csv")]),
        ("registry load", ["registry", "load", "examples/fleet.yaml"]),
        ("prune", ["prune", "--keep-raw", "30d"]),
        ("ingest file", ["ingest", "file", "examples/exporters/dcgm-h100-a-01.prom"]),
        ("registry show", ["registry", "show"]),
    ]

    def loop() -> None:
        i = 0
        while not stop.is_set():
            name, args = commands[i % len(commands)]
            done = hetpool(fleet_db, *args)
            cli.append((name, done.returncode, done.stdout + done.stderr, worst_wait(done.stderr)))
            i += 1

    worker = threading.Thread(target=loop)
    renders: list[tuple[str, list[str], float]] = []
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and not _healthy(health_port):
            time.sleep(0.5)
        assert _healthy(health_port), "serve never reported healthy"
        worker.start()
        STATS.accesses = STATS.waits = 0
        STATS.worst_s = STATS.total_s = 0.0
        os.environ[ENV_DB] = str(fleet_db)
        os.environ["HETPOOL_HEALTH_URL"] = f"http://127.0.0.1:{health_port}/health"
        ends = time.monotonic() + SOAK_S
        n = 0
        while time.monotonic() < ends:
            page = PAGES[n % len(PAGES)]
            began = time.monotonic()
            at = AppTest.from_file(MAIN, default_timeout=120).run().switch_page(page).run()
            problems = [str(e) for e in at.exception] + [str(e.value) for e in at.error]
            renders.append((page, problems, time.monotonic() - began))
            n += 1
        stop.set()
        worker.join(300)
        live.serving = False  # no new samples: the collectors can now catch up with everything served
        expected = live.expected_rows()
        last = max(ts for ts, *_ in expected)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and _stored_until(fleet_db) < last:
            time.sleep(0.5)
    finally:
        stop.set()
        os.environ.pop("HETPOOL_HEALTH_URL", None)
        served.send_signal(signal.SIGTERM)
        _, serve_err = served.communicate(timeout=120)
        prom.stop()
    assert served.returncode == 0, serve_err
    assert [r for r in renders if r[1]] == [], "console pages failed"
    assert len(renders) >= 5 and len(cli) >= len(commands)
    assert [(name, code, out[-300:]) for name, code, out, _ in cli if code != 0] == []
    for text in [serve_err, *(out for _, _, out, _ in cli)]:
        assert not LOCK_ERRORS.search(text), text[-500:]
    with Store(fleet_db).read() as con:
        accounting = con.execute("SELECT count(*), count(*) FILTER (WHERE read <> stored + rejected + duplicates "
                                 "+ ignored) FROM ingest_runs").fetchall()[0]
        rows = con.execute("SELECT ts, node, device, metric, value FROM samples WHERE node = ? AND metric IN "
                           f"({', '.join('?' * len(LIVE_METRICS))}) AND ts <= ?",
                           [NODE, *(m for m, _ in LIVE_METRICS.values()), last]).fetchall()
    assert accounting[0] > 20 and accounting[1] == 0
    stored = {(ts, node, device, metric, round(value, 9)) for ts, node, device, metric, value in rows}
    assert len(rows) == len(stored)  # no row twice
    assert stored == expected  # exactly what the exporter served, through either path
    ARTIFACTS.mkdir(exist_ok=True)
    waits = {"console_renders": len(renders), "console_worst_render_s": round(max(r[2] for r in renders), 2),
             "console_worst_lock_wait_s": round(STATS.worst_s, 3), "console_accesses": STATS.accesses,
             "cli_commands": len(cli), "cli_worst_lock_wait_s": {
                 name: max(w for n, _, _, w in cli if n == name) for name, _ in commands},
             "serve_worst_lock_wait_s": worst_wait(serve_err), "samples_served": len(expected)}
    (ARTIFACTS / "soak.json").write_text(json.dumps(waits, indent=2) + "\n")


def _healthy(port: int) -> bool:
    """Healthy, and every collector has brought data: a collector that has not finished a run yet counts as
    healthy, and on a loaded machine Prometheus' first scrape can come after the pull's first few runs."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
            body = json.loads(r.read())
            return r.status == 200 and all(c.get("last_data_at") for c in body.get("collectors", []))
    except OSError:
        return False


def _stored_until(db: Path) -> int:
    with Store(db).read() as con:
        got = con.execute("SELECT max(ts) FROM samples WHERE node = ?", [NODE]).fetchall()[0][0]
    return int(got or 0)
