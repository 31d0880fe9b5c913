"""Every console page under Streamlit's AppTest, on the small demo database and on empty ones.

The Fleet health tiles are checked against numbers computed here from raw samples (not the rollups the page
reads), and p99 TTFT against a quantile computed here from the raw bucket samples.
"""

from __future__ import annotations

import datetime as dt
import json
import urllib.parse
from pathlib import Path

import duckdb
import pandas as pd
import polars as pl
import pytest
from streamlit.testing.v1 import AppTest

from app.console.filters import VIEW_KEY
from app.console.tables import plain
from pool_registry import Registry
from store import ENV_DB, Held, IngestRun, commit_run, connect, require_registry
from tests.conftest import REPO
from tests.oracles import raw_quantile

MAIN = str(REPO / "app" / "console" / "main.py")
PAGES = ("screens/health.py", "screens/reliability.py", "screens/cost.py", "screens/export.py", "screens/fleet.py",
         "screens/versions.py", "screens/onboarding.py", "screens/node.py", "screens/device.py")
TITLES = ("Fleet health", "Errors and reliability", "Cost", "Export", "Fleet registry", "Versions", "Onboarding",
          "Node", "Device")
END = int(dt.datetime(2026, 11, 29, 8, tzinfo=dt.UTC).timestamp() * 1000)
START = END - 86_400_000  # "Last 24 hours" ends with the hour of the newest sample
POOLS = ("h100-a", "mi300x-a", "ascend-a", "gaudi3-a", "mlu370-a", "h100-vl")


def open_page(db: Path, monkeypatch: pytest.MonkeyPatch, page: str) -> AppTest:
    monkeypatch.setenv(ENV_DB, str(db))
    at = AppTest.from_file(MAIN, default_timeout=60).run()
    return at.switch_page(page).run()


def named(link: str, key: str = "node") -> str:
    """The node (or device) a table's link to the Node or Device page opens."""
    return urllib.parse.parse_qs(link.partition("?")[2])[key][0]


def texts(at: AppTest) -> str:
    return "\n".join(str(e.value) for e in [*at.markdown, *at.caption, *at.info, *at.success, *at.warning])


@pytest.mark.parametrize(("page", "title"), list(zip(PAGES, TITLES, strict=True)))
def test_every_page_renders_on_the_demo(demo_db: Path, monkeypatch: pytest.MonkeyPatch, page: str,
                                        title: str) -> None:
    at = open_page(demo_db, monkeypatch, page)
    assert not at.exception, at.exception
    assert not at.error
    assert at.title[0].value == title


def raw_tiles(con: duckdb.DuckDBPyConnection) -> dict[str, list[str]]:
    """The tile texts, from raw samples with JSON attribute tests (the page uses rollups and the device-wide flag)."""
    def one(sql: str, pool: str) -> float | None:
        got = con.execute(sql, [pool, START, END]).fetchall()
        return got[0][0] if got else None

    newest = con.execute("SELECT max(ts) FROM samples").fetchall()[0][0]
    declared = {p.id: p.devices for p in require_registry(con).pools}  # the demo grows pools too small for a replica
    since = (newest + 1 - 5 * 60_000) // 60_000 * 60_000
    out = {}
    for pool in POOLS:
        base = "FROM samples WHERE pool = ? AND ts >= ? AND ts < ?"
        reporting = con.execute(f"SELECT count(DISTINCT (node, device)) {base} AND ts >= ? AND device <> '' "
                                "AND metric LIKE 'accelerator.%'", [pool, START, END, since]).fetchall()[0][0]
        util = one(f"SELECT avg(value) {base} AND metric = 'accelerator.utilization' "
                   "AND json_extract_string(attributes, '$.engine') IS NULL", pool)
        hbm = one(f"SELECT sum(value) FILTER (WHERE metric = 'accelerator.memory.used') / sum(value) FILTER "
                  f"(WHERE metric = 'accelerator.memory.total') {base}", pool)
        power = one(f"SELECT sum(p) FROM (SELECT avg(value) AS p {base} AND metric = 'accelerator.power' "
                    "GROUP BY node, device)", pool)
        temp = one(f"SELECT max(value) {base} AND metric = 'accelerator.temperature'", pool)
        fatal = one(f"SELECT coalesce(sum(value), 0) {base} AND metric = 'accelerator.errors' "
                    "AND json_extract_string(attributes, '$.severity') = 'fatal'", pool)
        minutes = pl.DataFrame(con.execute(
            f"SELECT node, device, ts // 60000 AS minute, metric, value {base} "
            "AND metric IN ('accelerator.clock', 'accelerator.utilization') AND device <> ''",
            [pool, START, END]).fetchall(), schema=["node", "device", "minute", "metric", "value"], orient="row")
        per = minutes.pivot(on="metric", index=["node", "device", "minute"], values="value",
                            aggregate_function="mean")
        ref = per["accelerator.clock"].max()
        busy = pl.col("accelerator.utilization") >= 0.5
        devices = per.group_by("node", "device").agg(
            busy.sum().alias("busy"), (busy & (pl.col("accelerator.clock") < 0.9 * ref)).sum().alias("slow"))
        hit = devices.filter(pl.col("busy") > 0, pl.col("slow") >= 0.1 * pl.col("busy")).height
        throttled = hit / devices.height if devices.height else None  # a share of devices, not of minutes
        p99 = raw_quantile(con, "serving.time_to_first_token", START, END, 0.99, pool=pool)
        out[pool] = [
            f"{reporting} / {declared[pool]}", f"{util:.1%}", f"{hbm:.1%}", f"{power / 1000:,.1f} kW", f"{temp:.0f} °C",
            f"{throttled:.1%}" if throttled is not None else "–", f"{fatal:,.0f}",
            f"{p99:.2f} s" if p99 is not None else "–"]
    return out


def test_fleet_health_tiles_equal_raw_sql(demo_db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    at = open_page(demo_db, monkeypatch, "screens/health.py")
    shown = [m.value for m in at.metric]
    assert [m.label for m in at.metric[:8]] == ["Devices reporting", "Utilization", "HBM used", "Power",
                                                "Max temperature", "Throttled", "Fatal errors", "p99 TTFT"]
    con = connect(demo_db, read_only=True)
    try:
        expected = raw_tiles(con)
    finally:
        con.close()
    for i, pool in enumerate(POOLS):
        assert shown[8 * i: 8 * i + 8] == expected[pool], pool
    # the story, as an operator reads it off the tiles
    assert expected["h100-a"][0] == "1 / 2" and expected["h100-a"][6] != "0"   # a GPU off the bus, fatal errors
    assert expected["mlu370-a"][0] == "1 / 2" and expected["mlu370-a"][7] == "–"  # onboarding: no serving yet
    assert float(expected["ascend-a"][5].rstrip("%")) > 10                       # the hot pool throttles


def test_fleet_health_names_worst_devices_and_drifted_nodes(demo_db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    at = open_page(demo_db, monkeypatch, "screens/health.py")
    worst, drift = at.dataframe[1].value, at.dataframe[2].value  # the first is the status table
    issues = {(i, named(n)) for i, n in zip(worst["issue"], worst["node"], strict=True)}
    assert ("stopped reporting", "h100-a-02") in issues
    assert ("straggler", "mi300x-a-01") in issues
    assert {n for i, n in issues if i == "hot"} <= {"ascend-a-01", "ascend-a-02"}
    assert {n for i, n in issues if i == "hot"}
    assert sorted(zip(map(named, drift["node"]), drift["declared"], drift["observed"], strict=True)) == [
        ("gaudi3-a-01", "1.22.1", "1.22.2"), ("mi300x-a-02", "6.10.5", "6.12.12")]


def test_errors_page_drains_the_failing_node(demo_db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    at = open_page(demo_db, monkeypatch, "screens/reliability.py")
    drain, by_vendor, events = (d.value for d in at.dataframe)
    assert [named(n) for n in drain["node"]] == ["h100-a-02"]
    assert "fatal error events" in drain["reasons"][0] and "stopped reporting" in drain["reasons"][0]
    rel = shown(at.table[0].value)
    index = dict(zip(rel["pool"], rel["R"], strict=True))
    assert index["h100-a"] != "100.0%" and index["gaudi3-a"] == "100.0%"
    # the small demo's onboarding pool declares 2 devices and 1 reported: the silent one is counted
    assert rel.set_index("pool").loc["mlu370-a", "silent (never reported)"] == "1"
    # the XID 48 and the double-bit ECC counter rising with it are one incident, shown once with both codes
    assert set(events["code"]) >= {"79", "48+ecc_dbe_volatile"}
    assert set(events["vendor"]) == {"nvidia", "amd", "huawei", "intel", "cambricon"}  # every dialect's errors
    assert set(by_vendor["error_class"]) >= {"device_lost", "memory_uncorrectable"}
    assert any("healthy device-hours" in e.value for e in at.get("latex"))


def test_cost_page(demo_db: Path, monkeypatch: pytest.MonkeyPatch, fleet: Registry) -> None:
    at = open_page(demo_db, monkeypatch, "screens/cost.py")
    metrics = {m.label: m.value for m in at.metric}
    # the demo fleet: 2 devices per pool, or one replica's worth where 2 cannot hold the model, at each pool's price
    con = connect(demo_db, read_only=True)
    try:
        per_hour = sum(p.devices * p.hourly_cost_per_device for p in require_registry(con).pools)
    finally:
        con.close()
    assert metrics["Fleet cost per hour"] == f"${per_hour:,.2f}"
    assert metrics["Cost in window"] == f"${per_hour * 24:,.0f}"
    table = at.dataframe[0].value
    assert list(table["pool"]) == list(POOLS)
    assert table.set_index("pool")["idle_cost"]["mlu370-a"] > table.set_index("pool")["busy_cost"]["mlu370-a"]


def test_export_page_counts_and_offers_the_file(demo_db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    at = open_page(demo_db, monkeypatch, "screens/export.py")
    at.multiselect(key="export_metrics").set_value(["accelerator.power"]).run()
    at.radio(key="export_format").set_value("Parquet").run()
    assert not at.exception
    con = connect(demo_db, read_only=True)
    try:
        n = con.execute("SELECT count(*) FROM samples WHERE metric = 'accelerator.power' AND ts >= ? AND ts < ?",
                        [START, END]).fetchall()[0][0]
    finally:
        con.close()
    assert at.metric[0].value == f"{n:,}"
    assert set(at.dataframe[0].value["metric"]) == {"accelerator.power"}
    assert at.get("download_button")


def test_sidebar_window_and_pool_filter_apply_to_every_page(demo_db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    at = open_page(demo_db, monkeypatch, "screens/health.py")
    at.multiselect(key="pools").set_value(["h100-a", "ascend-a"]).run()
    at.selectbox(key="window").set_value("Last 6 hours").run()
    assert not at.exception
    assert len(at.metric) == 16
    assert "2026-11-29 02:00 to 2026-11-29 08:00 UTC" in texts(at)
    at.switch_page("screens/cost.py").run()  # the selection is kept across pages
    assert list(at.dataframe[0].value["pool"]) == ["h100-a", "ascend-a"]
    at.selectbox(key="window").set_value("Custom days").run()
    assert not at.exception and at.date_input(key="window_days")


def test_an_empty_database_explains_what_to_do_on_every_page(db_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             fleet_db: Path) -> None:
    for page in PAGES[:4]:
        at = open_page(fleet_db, monkeypatch, page)
        assert not at.exception
        assert "hetpool demo" in at.info[0].value
    connect(db_path.with_name("none.duckdb")).close()
    at = open_page(db_path.with_name("none.duckdb"), monkeypatch, "screens/cost.py")
    assert "hetpool registry load" in at.info[0].value


def test_a_window_without_the_selected_pool_shows_an_empty_state(fleet_db: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    con = connect(fleet_db)
    rows = pl.DataFrame({"ts": [END - 60_000], "pool": ["h100-a"], "node": ["h100-a-01"], "device": ["0"],
                         "metric": ["accelerator.utilization"], "value": [0.5], "attributes": [json.dumps({})]})
    run = IngestRun("file", "one sample")
    run.add_read(1)
    run.add_samples(rows)
    commit_run(Held(con), run)
    con.close()
    for page in PAGES[:4]:
        at = open_page(fleet_db, monkeypatch, page)
        at.multiselect(key="pools").set_value(["gaudi3-a"]).run()
        assert not at.exception, page
        assert any("in this window" in i.value for i in at.info), page


def test_a_fresh_store_opens_on_all_its_data_not_on_a_day_ending_with_it(fleet_db: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    # 25 minutes of live data: a 24-hour view would draw them as a dash at its right edge
    con = connect(fleet_db)
    ts = [END - 25 * 60_000 + k * 60_000 for k in range(26)]
    rows = pl.DataFrame({"ts": ts, "pool": "h100-a", "node": "h100-a-01", "device": "0",
                         "metric": "accelerator.utilization", "value": 0.5, "attributes": json.dumps({})})
    run = IngestRun("file", "25 minutes")
    run.add_read(rows.height)
    run.add_samples(rows)
    commit_run(Held(con), run)
    con.close()
    at = open_page(fleet_db, monkeypatch, PAGES[0])
    assert not at.exception
    assert at.selectbox(key="window").value == "All data"
    view = at.session_state[VIEW_KEY]
    assert (view.start_ms, view.end_ms) == (END - 3_600_000, END + 3_600_000)  # the two hours the data touch
    assert not any("in this window" in i.value for i in at.info)


def shown(frame: pd.DataFrame) -> pd.DataFrame:
    """A wrapping table's cells as the reader sees them (its Markdown escapes removed)."""
    return frame.map(plain)


def test_versions_page_flags_the_drifted_cells(demo_db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    at = open_page(demo_db, monkeypatch, "screens/versions.py")
    assert not at.exception and not at.error
    matrix = shown(at.table[0].value)
    flagged = {(row["pool"], col) for _, row in matrix.iterrows() for col in matrix.columns[1:]
               if str(row[col]).startswith("DRIFT: ")}
    assert flagged == {("mi300x-a", "driver"), ("gaudi3-a", "driver"), ("ascend-a", "exporter")}
    assert set(matrix["pool"][:3]) == {"mi300x-a", "gaudi3-a", "ascend-a"}  # drift first
    # each node counted once, at its newest version: the pool's two nodes, one of them drifted
    assert "declared 6.10.5; seen 6.10.5 (1 node), 6.12.12 (1 node)" in matrix["driver"][0]
    assert [e.label for e in at.expander] == ["mi300x-a · driver: 2 versions in the pool",
                                              "ascend-a · npu-exporter: 2 versions in the pool",
                                              "gaudi3-a · driver: 2 versions in the pool", "Per node (11 nodes)"]
    assert {e.proto.icon for e in at.expander[:3]} == {":material/warning:"}  # an icon needing no emoji font
    nodes = at.dataframe[0].value
    assert [named(n) for n in nodes["node"]] == ["mi300x-a-02"] and list(nodes["version"]) == ["6.12.12"]
    compat = next(shown(t.value) for t in at.table if "model" in t.value.columns).set_index("model")
    assert compat.loc["qwen3-235b-a22b", "mi300x-a"] == "PASS*"
    assert compat.loc["llama-3.1-70b", "mi300x-a"] == "FRAMEWORK_INCOMPATIBLE"
    assert compat.loc["llama-3.1-70b", "gaudi3-a"] == "FRAMEWORK_INCOMPATIBLE*"  # the canary's vllm 0.16


def test_a_url_with_query_parameters_restores_the_window_and_the_pools(demo_db: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_DB, str(demo_db))
    at = AppTest.from_file(MAIN, default_timeout=60)
    at.query_params.update({"window": "6h", "pool": ["h100-a", "ascend-a"]})
    at.run()
    assert not at.exception
    assert at.selectbox(key="window").value == "Last 6 hours"
    assert at.multiselect(key="pools").value == ["h100-a", "ascend-a"]
    assert "2026-11-29 02:00 to 2026-11-29 08:00 UTC" in texts(at)
    assert len(at.metric) == 16
    at.selectbox(key="window").set_value("Custom days").run()  # the widgets write the view back to the URL
    at.toggle(key="live").set_value(True).run()
    assert at.query_params == {"window": "days", "from": "2026-11-28", "to": "2026-11-29",
                               "pool": ["h100-a", "ascend-a"], "refresh": "1"}
    again = AppTest.from_file(MAIN, default_timeout=60)
    again.query_params.update({"window": "days", "from": "2026-11-29", "to": "2026-11-29", "pool": "mi300x-a",
                               "refresh": "1"})
    again.run()
    assert again.date_input(key="window_days").value == (dt.date(2026, 11, 29), dt.date(2026, 11, 29))
    assert again.multiselect(key="pools").value == ["mi300x-a"] and again.toggle(key="live").value
    assert "2026-11-29 00:00 to 2026-11-29 08:00 UTC" in texts(again)


def test_fleet_health_opens_with_the_verdict_and_colours_the_cards(demo_db: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    at = open_page(demo_db, monkeypatch, "screens/health.py")
    verdict = at.markdown[0].value
    assert verdict.startswith("### :red[:material/error: ")
    assert "pools critical: h100-a (1 of 2 devices reporting)" in verdict
    cards = {m.value.split("**")[1]: m.value for m in at.markdown if m.value.startswith("**")}
    assert set(cards) == set(POOLS)
    assert ":red-background[:material/error: critical] 1 of 2 devices reporting; " in cards["h100-a"]
    assert "fatal error event" in cards["h100-a"]
    assert ":orange-background[:material/warning: warning] 1 of 4 devices throttled (25%)" in cards["mi300x-a"]
    assert ":green-background[:material/check_circle: ok] every rule passes" in cards["gaudi3-a"]
    statuses = at.dataframe[0].value
    assert ("critical", "device", "h100-a") in set(zip(statuses["level"], statuses["scope"], statuses["pool"],
                                                       strict=True))
    deltas = [m.delta for m in at.metric[:8]]  # the previous 24 hours hold no data in the one-day demo
    assert not any(deltas)
    at.multiselect(key="pools").set_value(["mi300x-a"]).run()
    at.selectbox(key="window").set_value("Last 6 hours").run()
    assert at.markdown[0].value.startswith("### :orange[:material/warning: 1 of 1 pool warning: mi300x-a")
    assert at.metric[0].delta == "no change" and at.metric[6].delta == "no change"  # neutral, not "+0"


def test_onboarding_page_shows_the_cambricon_pool_part_way(demo_db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    at = open_page(demo_db, monkeypatch, "screens/onboarding.py")
    assert not at.exception, at.exception
    cards = [m.value for m in at.markdown if str(m.value).startswith("**")]
    assert any(c.startswith("**mlu370-a** · Cambricon MLU370-X8") for c in cards)
    progress = {w.proto.text: w.proto.value for w in at.get("progress")}
    assert progress["Stage: inference bring-up · 1 of 6 stages done"] == 16  # device abstraction done
    # started five days before the demo's end, inference bring-up not reached: over the three-day bar
    assert "Inference bring-up not reached after 5.3 days, over the three-day bar" in [w.value for w in at.warning]
    checklists = [shown(d.value) for d in at.table if "item" in d.value.columns]  # one per card, in card order
    table = checklists[next(i for i, c in enumerate(cards) if c.startswith("**mlu370-a**"))]
    # the canary has no checklist: its declared stage is what is known, and no bar is judged; its start keeps its
    # distance to the onboarding pool's (106 days before it in the example fleet), whenever the demo is built
    assert any(c.startswith("**gaudi3-a** · Intel Gaudi 3 (intel) · started 2026-08-10 · declared stage canary")
               for c in cards)
    said = " ".join(c.value for c in at.caption)
    assert ("Inference bring-up not tracked: the registry has no checklist for this pool (declared stage canary, "
            "started 111.3 days ago)") in said
    assert not any("gaudi3" in w.value for w in at.warning)
    status = dict(zip(table["item"], table["status"], strict=True))
    assert status["operators aligned"] == "PASS" and status["precision"] == "PASS"
    assert status["serving benchmark matches the pool's model"] == "FAIL"
    assert status["regression against the baseline loss curve"] == "FAIL"
    assert status["communication (collectives at bandwidth)"] == "PENDING"
    evidence = dict(zip(table["item"], table["evidence"], strict=True))
    assert evidence["regression against the baseline loss curve"] == "loss_baseline.csv, loss_candidate.csv"
