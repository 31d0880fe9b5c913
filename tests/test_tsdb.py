"""The status rules compiled for the TSDB (status/tsdb.py) judge as `hetpool alerts` does: the same planted DCGM
series go into the store and into `promtool test rules`, and the status alerts Prometheus fires are the statuses
`hetpool alerts` reports, device by device and level by level, and none on the healthy devices."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from status.alerts import alert_name
from status.rules import load_rules, load_rules_text
from status.tsdb import GROUP, status_group
from tests.cli import run
from tests.conftest import FLEET

T0_S = 1_796_025_600  # 2026-11-30T08:00:00Z
MINUTES = 30
MIB = 81_559  # an H100's HBM in MiB
FINE = {"temp": 60.0, "used": 0.10, "health": 1.0, "xid": 0.0, "until": MINUTES}
# node, gpu -> what is planted; every device gets one problem at most, so each status has one rule
PLANTED: dict[tuple[str, str], dict[str, float]] = {
    ("h100-a-01", "0"): {**FINE, "temp": 96.0},           # critical temperature (95 °C)
    ("h100-a-01", "1"): {**FINE, "temp": 90.0},           # warning temperature (85 °C)
    ("h100-a-02", "0"): {**FINE, "xid": 79.0},            # XID 79 from minute 10: fallen off the bus, critical
    ("h100-a-02", "1"): dict(FINE),                       # healthy: nothing, in either
    ("h100-a-03", "0"): {**FINE, "used": 0.99},           # critical HBM (98 %)
    ("h100-a-03", "1"): {**FINE, "used": 0.96},           # warning HBM (95 %)
    ("h100-a-04", "0"): {**FINE, "until": 10},            # stopped reporting after minute 10: warning
    ("h100-a-04", "1"): {**FINE, "health": 0.0},          # unhealthy: critical
}


def value(family: str, plant: dict[str, float], minute: int) -> float | None:
    """The planted value of a family at a minute (None once the device stopped reporting)."""
    if minute >= plant["until"]:
        return None
    used = round(plant["used"] * MIB)
    return {"DCGM_FI_DEV_GPU_TEMP": plant["temp"], "DCGM_FI_DEV_FB_USED": used, "DCGM_FI_DEV_FB_FREE": MIB - used,
            "DCGM_FI_DEV_FB_RESERVED": 0, "DCGM_EXP_GPU_HEALTH_STATUS": plant["health"],
            "DCGM_FI_DEV_XID_ERRORS": plant["xid"] if minute >= 10 else 0.0}[family]


FAMILIES = ("DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_FB_RESERVED",
            "DCGM_EXP_GPU_HEALTH_STATUS", "DCGM_FI_DEV_XID_ERRORS")


def labels(node: str, gpu: str) -> str:
    return f'gpu="{gpu}",UUID="GPU-{node}-{gpu}",Hostname="{node}"'


def openmetrics() -> str:
    lines = []
    for family in FAMILIES:
        lines.append(f"# TYPE {family} gauge")
        for (node, gpu), plant in PLANTED.items():
            for minute in range(MINUTES):
                v = value(family, plant, minute)
                if v is not None:
                    lines.append(f"{family}{{{labels(node, gpu)}}} {v:g} {T0_S + 60 * minute}")
    return "\n".join([*lines, "# EOF", ""])


def promtool_series() -> list[dict[str, str]]:
    out = []
    for family in FAMILIES:
        for (node, gpu), plant in PLANTED.items():
            values = [value(family, plant, m) for m in range(MINUTES)]
            out.append({"series": f"{family}{{{labels(node, gpu)}}}",
                        "values": " ".join("_" if v is None else f"{v:g}" for v in values)})
    return out


def test_each_level_is_one_alert_and_a_warning_stops_short_of_the_critical(fleet: object) -> None:
    group = status_group(load_rules(), None, "6h").group
    assert group["name"] == GROUP
    temps = [r for r in group["rules"] if r["alert"] == "HetpoolDeviceTemperature"]
    assert [(r["labels"]["severity"], r["expr"].split(")) ", 1)[1]) for r in temps] == [
        ("critical", ">= 95"), ("warning", ">= 85 < 95")]
    assert all("[6h]" in r["expr"] and "for" not in r for r in group["rules"])
    site = load_rules_text("temperature: {warning: null, critical: 90}\ndevice: {unhealthy: ok}\n", base=load_rules())
    names = [(r["alert"], r["labels"]["severity"]) for r in status_group(site, None).group["rules"]]
    assert ("HetpoolDeviceTemperature", "warning") not in names and ("HetpoolDeviceUnhealthy", "critical") not in names
    assert any(r["expr"].endswith(">= 90") for r in status_group(site, None).group["rules"])


@pytest.mark.prometheus
def test_promtool_fires_where_hetpool_alerts_reports(capsys: pytest.CaptureFixture[str], fleet_db: Path,
                                                     tmp_path: Path) -> None:
    assert shutil.which("promtool"), "promtool not found; `make test` installs the Debian prometheus package"
    om = tmp_path / "planted.om"
    om.write_text(openmetrics())
    code, _, err = run(capsys, "--db", str(fleet_db), "ingest", "file", str(om))
    assert code == 0, err
    code, out, err = run(capsys, "--db", str(fleet_db), "--json", "alerts")
    assert code == 1, err
    statuses = json.loads(out)["statuses"]
    devices = {(s["node"], s["device"]): s for s in statuses if s["scope"] == "device"}
    assert set(devices) == set(PLANTED) - {("h100-a-02", "1")}  # every planted problem, and only those
    pools = {s["pool"]: s for s in statuses if s["scope"] == "pool"}
    assert all(s["level"] == "critical" and " devices reporting" in s["reason"] for s in pools.values())
    assert "1 fatal error event in the window" in pools["h100-a"]["reason"]
    expected = [{"alertname": alert_name("device", s["rule"]), "severity": s["level"], "pool": "h100-a",
                 "node": node, "device": gpu, "vendor": "nvidia"} for (node, gpu), s in devices.items()]
    vendors = {"h100-a": "nvidia", "mi300x-a": "amd", "ascend-a": "huawei", "gaudi3-a": "intel",
               "mlu370-a": "cambricon", "h100-vl": "nvidia"}
    expected += [{"alertname": "HetpoolPoolReporting", "severity": "critical", "pool": p, "vendor": vendors[p]}
                 for p in pools]
    expected.append({"alertname": "HetpoolPoolFatalErrors", "severity": "critical", "pool": "h100-a",
                     "vendor": "nvidia"})
    rules = tmp_path / "rules.yaml"
    code, _, err = run(capsys, "--db", str(fleet_db), "rules", "--registry", str(FLEET), "--out", str(rules))
    assert code == 0, err
    test = {"rule_files": [str(rules)], "evaluation_interval": "1m", "tests": [{
        "interval": "1m", "input_series": promtool_series(),
        "promql_expr_test": [{
            "expr": 'ALERTS{alertname=~"Hetpool.+", alertstate="firing"}', "eval_time": f"{MINUTES - 1}m",
            "exp_samples": [{"labels": "ALERTS{" + ",".join(
                f'{k}="{v}"' for k, v in sorted({**e, "alertstate": "firing"}.items())) + "}", "value": 1}
                for e in expected]}]}]}
    path = tmp_path / "test.yaml"
    path.write_text(yaml.safe_dump(test, sort_keys=False))
    proc = subprocess.run(["promtool", "test", "rules", str(path)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "SUCCESS" in proc.stdout


@pytest.mark.prometheus
def test_site_rules_with_tiers_compile_to_one_rule_per_level_that_promtool_accepts(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out = tmp_path / "rules.yaml"
    code, printed, err = run(capsys, "--db", str(tmp_path / "none.duckdb"), "rules", "--registry", str(FLEET),
                             "--status-rules", str(FLEET.parent / "site-rules.yaml"), "--status-window", "6h",
                             "--out", str(out))
    assert code == 0, err
    proc = subprocess.run(["promtool", "check", "rules", "--lint=all", "--lint-fatal", str(out)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    group = next(g for g in yaml.safe_load(out.read_text())["groups"] if g["name"] == GROUP)
    ttft = [r for r in group["rules"] if r["alert"] == "HetpoolPoolTtftP99"]
    assert [r["labels"]["severity"] for r in ttft] == ["critical", "warning"]
    assert all(" / 0.5 >= " in r["expr"] and "[6h]" in r["expr"] for r in ttft)  # the premium tier's target
    assert "status rules not compiled: collector_lag: " in printed


@pytest.mark.parametrize(("argv", "message"), [
    (("--status-window", "a day"), "--status-window 'a day': "),
    (("--status-rules", "absent.yaml"), "absent.yaml: file not found"),
], ids=["window", "rules-file"])
def test_bad_status_options_are_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path, argv: tuple[str, ...],
                                         message: str) -> None:
    code, _, err = run(capsys, "--db", str(tmp_path / "none.duckdb"), "rules", "--registry", str(FLEET), *argv)
    assert code == 2 and len(err.strip().splitlines()) == 1 and message in err, err
