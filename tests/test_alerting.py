"""The alert sender of `hetpool serve` (app/serve/alerting.py) against a real Alertmanager: alerts held while
they hold and resolved when they clear; a down Alertmanager retried with backoff while collection goes on."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest

from app.alertmanager import Alertmanager
from app.serve.alerting import AlertSender
from app.serve.config import AlertmanagerPlan
from app.serve.health import HealthServer, health_report
from app.status_read import Judged
from pool_registry import Registry
from status.evaluate import Status
from store import Store
from store.views.window import Window
from tests.amserver import AlertmanagerServer
from tests.conftest import REPO
from tests.logins import console
from tests.processes import free_port
from tests.test_serve import health, wait_for

HOT = Status("critical", "device", "ascend-a", "ascend-a-01", "0", "reached 96 °C (critical at 95 °C)",
             rule="temperature")
SLOW = Status("warning", "pool", "h100-a", reason="p99 TTFT 1.70 s against the standard target of 2.00 s",
              rule="ttft_p99")


@pytest.fixture
def alertmanager(tmp_path: Path) -> Iterator[AlertmanagerServer]:
    am = AlertmanagerServer(tmp_path).start()
    yield am
    am.stop()


class Judgements:
    """The statuses each run judges, in turn (the last one repeats)."""

    def __init__(self, reg: Registry, *turns: tuple[Status, ...]):
        self.reg, self.turns, self.calls = reg, list(turns), 0

    def __call__(self) -> Judged:
        self.calls += 1
        statuses = self.turns.pop(0) if len(self.turns) > 1 else self.turns[0]
        return Judged(self.reg, Window(0, 1, ()), statuses)


def body(url: str) -> dict[str, Any]:
    """The health report, or an empty one while the endpoint does not answer."""
    got = health(url)
    return cast(dict[str, Any], got[1]) if got is not None else {}


def names(am: AlertmanagerServer) -> set[tuple[str, str]]:
    return {(a["labels"]["alertname"], a["labels"]["pool"]) for a in am.alerts()}


def test_the_demo_store_is_judged_and_sent(demo_db: Path, alertmanager: AlertmanagerServer) -> None:
    sender = AlertSender(Store(demo_db), AlertmanagerPlan(alertmanager.url, every_s=60, console_url="http://c"))
    assert sender.run_once() == 60
    got = alertmanager.alerts()
    assert ("HetpoolDeviceFatalErrors", "h100-a") in names(alertmanager)
    assert sender.report()["firing"] == len(got) > 0 and sender.report()["healthy"] is True
    # held for four runs (4 min) from the send, not the 5 min Alertmanager would take by itself
    ends = {a["endsAt"][:16] for a in got}
    assert len(ends) == 1


def test_a_status_that_clears_is_resolved_there(fleet: Registry, alertmanager: AlertmanagerServer) -> None:
    lines: list[str] = []
    judge = Judgements(fleet, (HOT, SLOW), (HOT,))
    sender = AlertSender(Store(REPO / "absent.duckdb"), AlertmanagerPlan(alertmanager.url, every_s=30),
                         judge_now=judge, log=lines.append)
    sender.run_once()
    assert names(alertmanager) == {("HetpoolDeviceTemperature", "ascend-a"), ("HetpoolPoolTtftP99", "h100-a")}
    first = {a["labels"]["alertname"]: a["startsAt"] for a in alertmanager.alerts()}
    sender.run_once()
    assert names(alertmanager) == {("HetpoolDeviceTemperature", "ascend-a")}
    (held,) = alertmanager.alerts()
    assert held["startsAt"] == first["HetpoolDeviceTemperature"]  # the same alert, still firing
    assert sender.report()["resolved"] == 1 and sender.report()["firing"] == 1
    assert lines == [f"alerts: 2 firing (2 new), 0 resolved, sent to {alertmanager.url}",
                     f"alerts: 1 firing (0 new), 1 resolved, sent to {alertmanager.url}"]


def test_a_down_alertmanager_is_retried_with_backoff_then_gets_what_waited(fleet: Registry, tmp_path: Path) -> None:
    port = free_port()
    lines: list[str] = []
    judge = Judgements(fleet, (HOT, SLOW), (HOT,))
    plan = AlertmanagerPlan(f"http://127.0.0.1:{port}", every_s=30, retry_s=2)
    sender = AlertSender(Store(tmp_path / "absent.duckdb"), plan, judge_now=judge, log=lines.append,
                         client=Alertmanager(plan.url, timeout_s=2))
    waits = [sender.run_once() for _ in range(6)]
    assert waits == [2, 4, 8, 16, 30, 30]  # doubling from retry_s, at most the run interval
    report = sender.report()
    assert report["healthy"] is False and report["failures_since_success"] == 6 and report["firing"] == 0
    assert report["problems"] == [f"6 send(s) failed since the last success, alerts waiting: cannot reach "
                                  f"Alertmanager at {plan.url}: connection refused"]
    assert len(lines) == 1  # said once, not on every retry
    am = AlertmanagerServer(tmp_path, port).start()
    try:
        assert sender.run_once() == 30
        assert names(am) == {("HetpoolDeviceTemperature", "ascend-a")}  # the pool status cleared while it was down
    finally:
        am.stop()
    assert sender.report()["healthy"] is True and sender.report()["failures_since_success"] == 0
    assert lines[1] == f"alerts: Alertmanager at {plan.url} reached again after 6 failed send(s)"


@pytest.mark.slow
def test_serve_with_a_down_alertmanager_collects_on_and_says_so(demo_db: Path, tmp_path: Path) -> None:
    db = tmp_path / "demo.duckdb"
    shutil.copyfile(demo_db, db)
    health_port, am_port = free_port(), free_port()
    drop = tmp_path / "drop"
    drop.mkdir()
    config = tmp_path / "serve.yaml"
    config.write_text(f"console: {{enabled: false}}\nhealth: {{port: {health_port}}}\n"
                      f"alertmanager: {{url: 'http://127.0.0.1:{am_port}', every: 2s}}\n"
                      "collectors:\n  - {name: drop, kind: folder, path: drop, every: 1s}\n")
    env = {**os.environ, "HETPOOL_ALERTMANAGER_TOKEN": "s3cret-token"}
    proc = subprocess.Popen([sys.executable, "-m", "app.cli", "--db", str(db), "serve", "--config", str(config)],
                            cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    url = f"http://127.0.0.1:{health_port}/health"
    am = AlertmanagerServer(tmp_path, am_port)
    try:
        wait_for(lambda: body(url).get("alertmanager", {}).get("failures", 0) >= 1, 60, "a failed send")
        shutil.copy(REPO / "examples" / "exporters" / "dcgm-h100-a-01.prom", drop / "h100.prom")
        wait_for(lambda: body(url).get("collectors", [{}])[0].get("total_stored", 0) > 0, 60,
                 "the dropped file stored")
        got = health(url)
        assert got is not None and got[0] == 503 and (drop / "done" / "h100.prom").exists()
        problems = body(url)["problems"]
        assert any(p.startswith("alertmanager: ") and "cannot reach Alertmanager" in p
                   for p in problems), json.dumps(problems)
        am.start()
        wait_for(lambda: body(url).get("alertmanager", {}).get("healthy") is True, 60, "the alerts delivered")
        # the dropped file moved the window to now, where the pools that stopped reporting are critical
        fired = {(a["labels"]["alertname"], a["labels"]["pool"]) for a in am.alerts()}
        assert ("HetpoolPoolReporting", "mi300x-a") in fired
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
        am.stop()
    assert proc.returncode == 0, err
    assert "Traceback" not in err and "s3cret-token" not in err
    assert "retrying in 2 s, collection goes on" in err and "reached again after" in err


def test_the_collectors_page_says_when_alerts_do_not_reach_alertmanager(fleet: Registry, fleet_db: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    plan = AlertmanagerPlan(f"http://127.0.0.1:{free_port()}", every_s=30)
    sender = AlertSender(Store(fleet_db), plan, judge_now=Judgements(fleet, (HOT,)),
                         client=Alertmanager(plan.url, timeout_s=2))
    sender.run_once()
    sender.run_once()
    server = HealthServer("127.0.0.1", 0, lambda: health_report([], None, {"alertmanager": sender.report()})).start()
    try:
        monkeypatch.setenv("HETPOOL_HEALTH_URL", f"{server.url}/health")
        at = console(fleet_db, monkeypatch).run().switch_page("screens/collectors.py").run()
    finally:
        server.stop()
    assert not at.exception
    assert at.subheader[0].value == "Alerts to Alertmanager"
    shown = [e.value for e in at.error if e.value.startswith("Alerts do not reach ")]
    assert shown and "2 send(s) failed since the last success (–); next attempt 20" in shown[0], shown
    assert "Collection goes on." in shown[0] and "cannot reach Alertmanager" in shown[0]
    assert any(e.value.startswith("Unhealthy: alertmanager: 2 send(s) failed") for e in at.error)
