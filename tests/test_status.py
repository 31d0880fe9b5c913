"""The status rules on planted cases, each status with its reason at device, node and pool level.

The store side reads the hand-built fleet of test_views (see its docstring for what each device does); the
registry is the example fleet shrunk to the devices planted there (h100-a 3, ascend-a 2), so that every
threshold crossed below is one worked out by hand.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import polars as pl
import pytest

from app.status_read import read_facts
from pool_registry import Registry, Thermal
from status.evaluate import Facts, Status, evaluate
from status.rules import RulesError, load_rules, load_rules_text
from status.verdict import pool_status, verdict
from store import Held, IngestRun, commit_run, connect, save_registry
from store.rollups import HOUR_MS, MINUTE_MS
from store.views.status import FACTS_SCHEMA, LAG_SCHEMA
from store.views.window import Window
from tests.test_views import ALL, T0, fleet_rows

WHOLE = Window(T0, T0 + 2 * HOUR_MS)
RULES = load_rules()


def small(fleet: Registry, thermal: Thermal | None = None) -> Registry:
    """The example fleet with h100-a and ascend-a shrunk to the planted devices."""
    sizes = {"h100-a": (3, 2), "ascend-a": (2, 1)}
    pools = tuple(dataclasses.replace(p, devices=sizes[p.id][0], devices_per_node=sizes[p.id][1])
                  for p in fleet.pools if p.id in sizes)
    chips = tuple(dataclasses.replace(c, thermal=thermal) if c.id == "ascend-910b" else c for c in fleet.chips)
    return dataclasses.replace(fleet, pools=pools, chips=chips)


@pytest.fixture(scope="module")
def facts(tmp_path_factory: pytest.TempPathFactory, fleet: Registry) -> Facts:
    path = tmp_path_factory.mktemp("status") / "status.duckdb"
    con = connect(path)
    save_registry(con, small(fleet), "small")
    raw = fleet_rows()
    run = IngestRun("file", "hand-built")
    run.add_read(raw.height)
    run.add_samples(raw)
    commit_run(Held(con), run)
    con.close()
    ro = connect(path, read_only=True)
    try:
        return read_facts(ro, WHOLE, ALL, now_ms=T0 + 2 * HOUR_MS)
    finally:
        ro.close()


def by_place(statuses: tuple[Status, ...]) -> dict[tuple[str, str], Status]:
    return {(s.scope, s.where): s for s in statuses}


def test_devices_nodes_and_pools_of_the_planted_fleet(facts: Facts, fleet: Registry) -> None:
    got = by_place(evaluate(small(fleet), RULES, facts))
    # h100-a n2/0: fatal XID 79 at minute 65, silent from minute 100 (20 minutes before the end)
    assert got["device", "h100-a/n2/0"] == Status(
        "critical", "device", "h100-a", "n2", "0",
        "1 fatal error event (codes 79); stopped reporting: no sample for 20 min")
    assert got["node", "h100-a/n2"].level == "critical"
    assert got["node", "h100-a/n2"].reason == "device 0: 1 fatal error event (codes 79)"
    # n1/1 stuck at 1.2 GHz against the pool's 1.98 GHz in all its 120 busy minutes
    assert got["device", "h100-a/n1/1"] == Status("warning", "device", "h100-a", "n1", "1",
                                                   "throttled in 120 of 120 busy minutes")
    assert got["node", "h100-a/n1"].level == "warning"
    # ascend-a n1/0 at 90 °C (default limits 85 / 95), its clock down to 1.2 GHz for 60 of 120 busy minutes
    assert got["device", "ascend-a/n1/0"] == Status(
        "warning", "device", "ascend-a", "n1", "0",
        "reached 90 °C (warning at 85 °C); throttled in 60 of 120 busy minutes")
    assert ("device", "ascend-a/n2/0") not in got and ("device", "h100-a/n1/0") not in got
    # pools: 2 of 3 reporting (< 75 %), one fatal event, 1 of 3 throttled (>= 25 %), p99 TTFT 1.96 s of 2.00 s
    h100 = got["pool", "h100-a"]
    assert h100.level == "critical"
    assert h100.reason.split("; ")[:4] == [
        "2 of 3 devices reporting", "1 fatal error event in the window",
        "1 of 3 devices throttled (33%)", "p99 TTFT 1.96 s against the standard target of 2.00 s"]
    # ascend-a: both report, 1 of 2 throttled (>= 50 %: critical), and a warning node rolled up
    ascend = got["pool", "ascend-a"]
    assert ascend.level == "critical"
    assert ascend.reason == ("1 of 2 devices throttled (50%); "
                             "node n1 warning: device 0: reached 90 °C (warning at 85 °C)")


def test_chip_limits_sla_tiers_and_site_overrides(facts: Facts, fleet: Registry) -> None:
    site = load_rules_text("hbm_used: {warning: 0.5}\nthrottled_devices: {critical: null}\n"
                           "sla: {pools: {h100-a: premium}}\n", "site.yaml", base=RULES)
    got = by_place(evaluate(small(fleet, Thermal(80, 88)), site, facts))
    assert got["device", "ascend-a/n1/0"].reason.startswith("reached 90 °C (critical at 88 °C); HBM 50% full")
    assert got["device", "ascend-a/n1/0"].level == "critical"
    assert got["device", "ascend-a/n2/0"] == Status("warning", "device", "ascend-a", "n2", "0", "HBM 50% full")
    assert "p99 TTFT 1.96 s against the premium target of 0.50 s" in got["pool", "h100-a"].reason
    assert got["pool", "ascend-a"].reason.startswith("1 of 2 devices throttled (50%)")  # now only a warning
    assert RULES.throttled_devices.critical == 0.5 and site.throttled_devices.critical is None
    assert site.sources[-1] == "site.yaml"


def test_health_node_wide_errors_and_a_lagging_collector(fleet: Registry) -> None:
    row = {c: None for c in FACTS_SCHEMA} | {"pool": "h100-a", "node": "n9", "fatal_errors": 0.0, "fatal_codes": "",
                                              "stopped": False, "throttled": False}
    devices = pl.DataFrame([row | {"device": "3", "last_health": 0.0},
                            row | {"device": "", "fatal_errors": 2.0, "fatal_codes": "48"}], schema=FACTS_SCHEMA)
    tiles = pl.DataFrame({"pool": ["h100-a"], "reporting": [3], "fatal_errors": [2.0], "ttft_p99": [None]},
                         schema_overrides={"ttft_p99": pl.Float64})
    now = T0 + 3 * HOUR_MS
    collectors = pl.DataFrame([("prometheus", "http://prom:9090 dcgm", now - 45 * MINUTE_MS, "ok"),
                               ("scrape", "http://gpu-1:9400/metrics", now - 5 * MINUTE_MS, "ok")],
                              schema=LAG_SCHEMA, orient="row")
    got = by_place(evaluate(small(fleet), RULES, Facts(devices, tiles, collectors, now), ("h100-a",)))
    assert got["device", "h100-a/n9/3"].reason == "last health reading unhealthy"
    assert got["node", "h100-a/n9"] == Status(
        "critical", "node", "h100-a", "n9", "",
        "device 3: last health reading unhealthy; node-wide: 2 fatal error events (codes 48)")
    assert got["pool", "h100-a"].reason.startswith("2 fatal error events in the window")
    lag = got["collector", "prometheus http://prom:9090 dcgm"]
    assert lag.level == "critical" and lag.reason == "newest sample 45 min old (last run ok)"
    assert ("collector", "scrape http://gpu-1:9400/metrics") not in got  # 5 min is under the 10 min warning
    level, sentence = verdict(tuple(got.values()), ("h100-a",))
    assert level == "critical"
    assert sentence == ("1 of 1 pool critical: h100-a (2 fatal error events in the window); 1 collector lagging "
                        "(prometheus http://prom:9090 dcgm: newest sample 45 min old (last run ok)).")


def test_a_quiet_fleet_is_ok(fleet: Registry) -> None:
    empty = Facts(pl.DataFrame(schema=FACTS_SCHEMA), pl.DataFrame({"pool": ["h100-a"], "reporting": [3],
                                                                   "fatal_errors": [0.0], "ttft_p99": [0.4]}),
                  pl.DataFrame(schema=LAG_SCHEMA), 0)
    statuses = evaluate(small(fleet), RULES, empty, ("h100-a",))
    assert statuses == ()
    assert pool_status(statuses, "h100-a") == ("ok", "every rule passes")
    assert verdict(statuses, ("h100-a",)) == ("ok", "Pool h100-a is healthy: no status rule fires in this window.")
    assert verdict(statuses, ("h100-a", "ascend-a"))[1].startswith("All 2 pools are healthy")


BAD = [
    ("temperature: {warning: 99, critical: 90}\n",
     "1: temperature.warning: warning 99 must be below or at critical 90 (the rule fires at or above a level)"),
    ("version: 1\nreporting: {warning: 0.5, critical: 0.9}\n",
     "2: reporting.warning: warning 0.5 must be above or at critical 0.9 (the rule fires below a level)"),
    ("hbm_used:\n  warning: 1.5\n", "2: hbm_used.warning: must be <= 1, got 1.5"),
    ("collector_lag: {warning: soon}\n",
     "1: collector_lag.warning: bad duration 'soon'; expected a number with a unit, like 15s, 6h or 14d"),
    ("device:\n  unhealthy: fatal\n",
     "2: device.unhealthy: unknown value 'fatal'; expected one of: ok, warning, critical"),
    ("sla:\n  pools:\n    h100-a: gold\n",
     "3: sla.pools.h100-a: unknown tier 'gold'; known: standard, premium, batch"),
    ("sla:\n  tiers:\n    gold: {ttft_s: 1}\n", "3: sla.tiers.gold.ttft_s: unknown key 'ttft_s'; did you mean"),
    ("temprature: {warning: 80}\n", "1: temprature: unknown key 'temprature'; did you mean 'temperature'?"),
    ("fatal_errors: [1]\n", "1: fatal_errors: expected a mapping, got a list"),
    ("ttft_p99: {warning: 0.8\n", ": YAML syntax error"),
]


@pytest.mark.parametrize(("text", "expected"), BAD)
def test_a_bad_rules_file_names_file_line_and_field(tmp_path: Path, text: str, expected: str) -> None:
    site = tmp_path / "site.yaml"
    site.write_text(text)
    with pytest.raises(RulesError) as info:
        load_rules(site)
    problems = [str(p) for p in info.value.problems]
    assert any(p.startswith(f"{site}:") and expected in p for p in problems), problems


def test_the_environment_names_the_site_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    site = tmp_path / "site.yaml"
    site.write_text("temperature: {critical: 99}\n")
    monkeypatch.setenv("HETPOOL_RULES", str(site))
    rules = load_rules()
    assert rules.temperature.critical == 99 and rules.temperature.warning == 85
    assert rules.sources[-1] == str(site)


def test_facts_of_a_window_read_the_store(facts: Facts) -> None:
    d = {(r["pool"], r["node"], r["device"]): r for r in facts.devices.iter_rows(named=True)}
    assert d["ascend-a", "n1", "0"]["temp_max"] == 90.0 and d["ascend-a", "n1", "0"]["throttled_minutes"] == 60
    assert d["h100-a", "n2", "0"]["stopped"] and d["h100-a", "n2", "0"]["silent_ms"] == 20 * MINUTE_MS + 1
    assert d["h100-a", "n1", "0"]["hbm_used"] == pytest.approx(0.5)
    assert d["h100-a", "n2", "0"]["last_health"] == 1.0  # unhealthy only in minutes 60-69



def test_chip_thermal_limits_are_validated_and_kept_in_snapshots(tmp_path: Path) -> None:
    from pool_registry import RegistryError, load_registry_text, registry_from_json, registry_to_json
    from tests.conftest import FLEET

    text = FLEET.read_text().replace("    supported_dtypes: [fp32, bf16, fp16, int8]\n",
                                     "    supported_dtypes: [fp32, bf16, fp16, int8]\n"
                                     "    thermal: {warning_c: 80, critical_c: 88}\n", 1)
    reg = load_registry_text(text, "fleet.yaml")
    assert reg.chip("ascend-910b").thermal == Thermal(80.0, 88.0) and reg.chip("h100-sxm").thermal is None
    assert registry_from_json(registry_to_json(reg)) == reg
    line = text.splitlines().index("    thermal: {warning_c: 80, critical_c: 88}") + 1
    with pytest.raises(RegistryError) as info:
        load_registry_text(text.replace("critical_c: 88", "critical_c: 70"), "fleet.yaml")
    assert str(info.value) == (f"fleet.yaml:{line}: chips[2].thermal.critical_c: critical limit 70 °C must be above "
                               "the warning limit 80 °C")


def test_the_example_site_file_overrides_only_what_it_names() -> None:
    from tests.conftest import REPO

    rules = load_rules(REPO / "examples" / "site-rules.yaml")
    assert rules.temperature == dataclasses.replace(RULES.temperature, warning=88.0)
    assert rules.reporting.critical == 0.5 and rules.reporting.warning == RULES.reporting.warning
    assert rules.ttft_target("h100-a") == ("premium", 0.5) and rules.ttft_target("mi300x-a") == ("standard", 2.0)
    assert rules.hbm_used == RULES.hbm_used


def test_a_device_is_hot_from_its_chips_warning_limit_else_the_rules(fleet: Registry, tmp_path: Path) -> None:
    """The temperature from which Fleet health calls a device hot is the status rules', or its chip's own."""
    from status.evaluate import warning_temperatures

    reg = small(fleet, Thermal(78.0, 90.0))
    site = tmp_path / "site.yaml"
    site.write_text("temperature: {warning: 70, critical: 99}\n")
    for rules, default in ((load_rules(), 85.0), (load_rules(site), 70.0)):
        hot = warning_temperatures(reg, rules)
        assert hot == {p.id: 78.0 if reg.chip_of(p).id == "ascend-910b" else default for p in reg.pools}
        assert rules.temperature.warning == default
    assert warning_temperatures(None, load_rules()) == {}
