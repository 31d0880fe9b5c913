"""The runway of `hetpool serve` (app/serve/runway.py): computed on its schedule and stored, its alert fired at a
real Alertmanager while a pool's runway is short and resolved once a computation shows it holding."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from app.serve.alerting import AlertSender
from app.serve.config import AlertmanagerPlan, RunwayPlan, ServeConfigError, load_serve_text
from app.serve.runway import ALERT, RunwaySchedule, stored_runway_alerts
from app.status_read import Judged
from store import Store, connect
from store.runways import latest_runways
from store.views.window import Window
from tests.amserver import AlertmanagerServer
from tests.test_runway_breaking import END_MS, MM4, history
from tests.test_runway_cli import CANDIDATE, ingest, mm4_db  # noqa: F401  (the fixture)

NOW = END_MS / 1000 + 3600  # an hour after the last stored request


@pytest.fixture
def alertmanager(tmp_path: Path) -> Iterator[AlertmanagerServer]:
    am = AlertmanagerServer(tmp_path).start()
    yield am
    am.stop()


def test_a_short_runway_fires_and_resolves_when_replicas_make_it_hold(
        capsys: pytest.CaptureFixture[str], mm4_db: Path, tmp_path: Path,  # noqa: F811
        alertmanager: AlertmanagerServer) -> None:
    ingest(capsys, mm4_db, history(11), tmp_path / "history.csv")
    knowing = tmp_path / "knowing.yaml"
    knowing.write_text(CANDIDATE)
    grown = tmp_path / "grown.yaml"  # the pool after its operators doubled it
    grown.write_text(CANDIDATE + "pools:\n  p: {replicas: 8}\n")
    store = Store(mm4_db)
    lines: list[str] = []
    schedule = RunwaySchedule(store, RunwayPlan(candidate=knowing, horizon_weeks=12), log=lines.append,
                              clock=lambda: NOW)
    plan = AlertmanagerPlan(alertmanager.url, every_s=30, console_url="http://c", runway_alert_weeks=8)
    sender = AlertSender(store, plan, judge_now=lambda: Judged(MM4, Window(0, 1, ()), ()),
                         more=stored_runway_alerts(store, plan.runway_alert_weeks, plan.console_url, lambda: NOW))
    schedule.run_once()
    assert schedule.report()["healthy"], (schedule.report(), lines)
    assert schedule.report()["breaking"] == ["p"]
    assert lines[-1].startswith("runway: 1 pools computed in") and lines[-1].endswith("breaking within the horizon: p")
    sender.run_once()
    (alert,) = alertmanager.alerts()
    assert alert["labels"] == {"alertname": ALERT, "severity": "warning", "pool": "p", "vendor": "test"}
    # about six weeks (Erlang-C's date, tests/test_runway_breaking.py): under the 8 asked, over the default 4
    assert "breaks its SLA tolerance in ~" in alert["annotations"]["summary"]
    weeks = float(alert["annotations"]["summary"].split("~")[1].split(" ")[0])
    assert 5.0 <= weeks <= 7.2
    assert alert["annotations"]["console"] == "http://c/health?pool=p"
    assert stored_runway_alerts(store, 4.0, "", lambda: NOW)() == ()
    # the operators add replicas: the next computation holds, and the next send resolves the alert
    RunwaySchedule(store, RunwayPlan(candidate=grown, horizon_weeks=12), clock=lambda: NOW + 86_400).run_once()
    latest = latest_runways(connect(mm4_db, read_only=True))
    assert latest["breaks_on"].to_list() == [None] and latest["candidate"].to_list() == ["knowing"]
    assert latest["status"].to_list() == ["holds"]
    sender.run_once()
    assert alertmanager.alerts() == []
    assert sender.report()["resolved"] == 1


def test_a_failed_computation_is_the_schedules_status_not_the_services_end(tmp_path: Path) -> None:
    lines: list[str] = []
    db = tmp_path / "empty.duckdb"
    c = connect(db)
    from store import save_registry
    save_registry(c, MM4, "mm4.yaml")
    c.close()
    schedule = RunwaySchedule(Store(db), RunwayPlan(), log=lines.append)
    schedule.run_once()
    schedule.run_once()
    report = schedule.report()
    assert report["healthy"] is False and report["failures"] == 2
    assert report["problems"] == ["last run failed: RunwayError: no stored requests: ingest traffic first "
                                  "(hetpool ingest traffic)"]
    assert len(lines) == 1  # said once


SERVE = "collectors:\n  - {name: drop, kind: folder, path: drop}\n"


def test_the_serve_file_takes_a_runway_section(tmp_path: Path) -> None:
    cfg = load_serve_text(SERVE + "runway: {every: 12h, candidate: c.yaml, growth: 3%/week, horizon: 8w}\n"
                          "alertmanager: {url: 'http://am:9093', runway_alert_weeks: 6}\n", "s.yaml", tmp_path)
    assert cfg.runway == RunwayPlan(every_s=43_200, candidate=tmp_path / "c.yaml", growth=0.03, horizon_weeks=8)
    assert cfg.alertmanager is not None and cfg.alertmanager.runway_alert_weeks == 6
    assert load_serve_text(SERVE + "runway: {}\n", "s.yaml", tmp_path).runway == RunwayPlan()


@pytest.mark.parametrize(("text", "message"), [
    ("runway: {growth: fast}\n", "s.yaml:3: runway.growth: 'fast': expected auto or a rate such as 5%/week"),
    ("runway: {window: 36h}\n", "s.yaml:3: runway.window: expected whole days, like 28d, got 1.5 days"),
    ("runway: {often: 1d}\n", "s.yaml:3: runway.often: unknown key 'often'"),
    ("alertmanager: {url: 'http://am:9093', runway_alert_weeks: 0}\n", "s.yaml:3: alertmanager.runway_alert_weeks"),
])
def test_bad_runway_settings_are_named(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ServeConfigError) as exc:
        load_serve_text(SERVE + text, "s.yaml", tmp_path)
    assert str(exc.value.problems[0]).startswith(message), str(exc.value.problems[0])
