"""Statuses as Alertmanager alerts (status/alerts.py) and `hetpool alerts --send` into a real Alertmanager."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.cli import build_parser
from pool_registry import Registry
from status.alerts import alert_name, alert_of, alerts_of, batch, iso, page_url
from status.evaluate import Status
from tests.amserver import AlertmanagerServer
from tests.cli import run
from tests.conftest import REPO
from tests.processes import free_port
from tests.test_cli import leaf_commands

DEVICE = Status("critical", "device", "h100-a", "h100-a-02", "0", "4 fatal error events (codes 79); stopped "
                "reporting: no sample for 140 min", rule="fatal_errors")
POOL = Status("warning", "pool", "mi300x-a", reason="1 of 4 devices throttled (25%)", rule="throttled_devices")
T0 = 1_796_025_600_000  # 2026-11-30T08:00:00Z


@pytest.fixture
def alertmanager(tmp_path: Path) -> Iterator[AlertmanagerServer]:
    am = AlertmanagerServer(tmp_path).start()
    yield am
    am.stop()


@pytest.mark.parametrize(("scope", "rule", "name"), [
    ("device", "temperature", "HetpoolDeviceTemperature"),
    ("device", "stopped_reporting", "HetpoolDeviceStoppedReporting"),
    ("pool", "ttft_p99", "HetpoolPoolTtftP99"),
    ("node", "hbm_used", "HetpoolNodeHbmUsed"),
    ("collector", "collector_lag", "HetpoolCollectorCollectorLag"),
])
def test_alert_names_are_scope_and_rule(scope: str, rule: str, name: str) -> None:
    assert alert_name(scope, rule) == name


def test_a_device_alert_has_the_documented_labels_and_links_to_its_page(fleet: Registry) -> None:
    alert = alert_of(DEVICE, fleet, "https://hetpool.example/")
    assert dict(alert.labels) == {"alertname": "HetpoolDeviceFatalErrors", "severity": "critical", "pool": "h100-a",
                                  "node": "h100-a-02", "device": "0", "vendor": "nvidia"}
    assert alert.url == "https://hetpool.example/device?node=h100-a-02&pool=h100-a&device=0"
    assert alert.summary == "critical device h100-a/h100-a-02/0: 4 fatal error events (codes 79)"
    body = alert.body(T0, T0 + 240_000)
    assert body["startsAt"] == "2026-11-30T08:00:00.000Z" and body["endsAt"] == "2026-11-30T08:04:00.000Z"
    assert body["annotations"] == {"summary": alert.summary, "description": DEVICE.reason, "console": alert.url}


def test_a_pool_alert_has_no_node_or_device_label_and_links_to_fleet_health(fleet: Registry) -> None:
    alert = alert_of(POOL, fleet, "")
    assert dict(alert.labels) == {"alertname": "HetpoolPoolThrottledDevices", "severity": "warning",
                                  "pool": "mi300x-a", "vendor": "amd"}
    assert alert.url == "/health?pool=mi300x-a"
    assert page_url("http://c", "p", "n 1") == "http://c/node?node=n+1&pool=p"


def test_ok_statuses_raise_no_alert(fleet: Registry) -> None:
    assert alerts_of([Status("ok", "pool", "h100-a")], fleet) == ()


def test_a_batch_holds_current_alerts_keeps_their_start_and_resolves_the_gone(fleet: Registry) -> None:
    device, pool = alerts_of([DEVICE, POOL], fleet)
    first = batch([device, pool], {}, T0, 240_000)
    assert first.firing == {device.labels: T0, pool.labels: T0} and first.resolved == 0
    assert [b["endsAt"] for b in first.bodies] == [iso(T0 + 240_000)] * 2
    # a minute later the pool cleared: the device keeps its start, the pool is resolved at now
    later = T0 + 60_000
    second = batch([device], first.firing, later, 240_000)
    assert second.firing == {device.labels: T0} and second.resolved == 1
    held, resolved = second.bodies
    assert (held["startsAt"], held["endsAt"]) == (iso(T0), iso(later + 240_000))
    assert resolved == {"labels": dict(pool.labels), "startsAt": iso(T0), "endsAt": iso(later)}
    assert batch([], {}, later, 240_000).bodies == ()


def test_alerts_send_posts_the_demos_critical_alerts_to_a_real_alertmanager(
        capsys: pytest.CaptureFixture[str], demo_db: Path, alertmanager: AlertmanagerServer) -> None:
    code, out, err = run(capsys, "--db", str(demo_db), "--json", "alerts", "--send", alertmanager.url,
                         "--console-url", "http://console.example:8501", "--hold", "10m")
    assert code == 1, err  # the demo has critical statuses
    report = json.loads(out)
    wanted = {s["where"] for s in report["statuses"]}
    got = alertmanager.alerts()
    assert report["sent"] == {"url": alertmanager.url, "alerts": len(got), "hold_s": 600.0}
    assert len(got) == len(wanted) == report["critical"] + report["warning"]
    by_place = {"/".join(a["labels"].get(k, "") for k in ("pool", "node", "device")).rstrip("/"): a for a in got}
    assert set(by_place) == wanted
    lost = by_place["h100-a/h100-a-02/0"]  # the demo's GPU that fell off the bus: XID 79, then silence
    assert lost["labels"] == {"alertname": "HetpoolDeviceFatalErrors", "severity": "critical", "pool": "h100-a",
                              "node": "h100-a-02", "device": "0", "vendor": "nvidia"}
    assert lost["annotations"]["console"] == "http://console.example:8501/device?node=h100-a-02&pool=h100-a&device=0"
    assert "fatal error event" in lost["annotations"]["description"]
    assert lost["generatorURL"] == lost["annotations"]["console"] and lost["status"]["state"] == "active"
    assert {a["labels"]["severity"] for a in got} == {"critical", "warning"}
    criticals = {w for w, a in by_place.items() if a["labels"]["severity"] == "critical"}
    assert criticals == {s["where"] for s in report["statuses"] if s["level"] == "critical"}


@pytest.mark.parametrize(("argv", "message"), [
    (("--send", "ftp://am:9093"), "bad Alertmanager URL 'ftp://am:9093'; expected http(s)://host:port"),
    (("--send", "http://user:pw@am:9093"), "credentials do not belong in the Alertmanager URL; set "
                                           "HETPOOL_ALERTMANAGER_TOKEN"),
    (("--send", "http://127.0.0.1:9", "--hold", "soon"), "--hold 'soon': "),
    (("--send", "http://127.0.0.1:9", "--hold", "0s"), "--hold '0s': duration '0s' must be positive"),
], ids=["scheme", "credentials", "hold-text", "hold-zero"])
def test_bad_send_options_are_one_line(capsys: pytest.CaptureFixture[str], demo_db: Path, argv: tuple[str, ...],
                                       message: str) -> None:
    code, _, err = run(capsys, "--db", str(demo_db), "alerts", *argv)
    assert code == 2 and len(err.strip().splitlines()) == 1 and message in err, err
    assert "pw" not in err


def test_a_down_alertmanager_is_one_line_naming_it(capsys: pytest.CaptureFixture[str], demo_db: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    code, _, err = run(capsys, "--db", str(demo_db), "alerts", "--send", url)
    assert code == 2 and err.startswith(f"hetpool: error: cannot reach Alertmanager at {url}: "), err


@pytest.mark.parametrize("command", ["hetpool alerts", "hetpool rules", "hetpool serve"])
def test_every_option_is_in_the_commands_readme_section_and_the_alerting_section_exists(command: str) -> None:
    reference = (REPO / "docs" / "cli.md").read_text()
    section = reference.split(f"### `{command}", 1)[1].split("\n### ", 1)[0]  # the heading's arguments too
    parser = leaf_commands(build_parser())[command]
    options = {o for a in parser._actions for o in a.option_strings if o.startswith("--")}
    common = {"--help", "--db", "--json", "--verbose", "--quiet"}
    missing = sorted(o for o in options - common if not re.search(rf"[` ]{re.escape(o)}\b", section))
    assert not missing, f"{command}: options not in its docs/cli.md section: {missing}"
    assert "[Alerting](alerting.md)" in section
    alerting = (REPO / "docs" / "alerting.md").read_text()
    assert all(word in alerting for word in ("alertmanager:", "alerts --send", "Silences are acknowledgements",
                                             "hetpool_status", "createdBy"))
