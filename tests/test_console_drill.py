"""The Node and Device pages under AppTest on the small demo, and the links that open them, checked against the store.

The demo's failing node is h100-a-02: its one device (0) records XID 79 events and stops reporting.
"""

from __future__ import annotations

import json
import urllib.parse
from pathlib import Path

import duckdb
import pytest
from streamlit.testing.v1 import AppTest

from store import ENV_DB, connect
from tests.test_console_pages import END, MAIN, START

POOL, NODE, DEVICE = "h100-a", "h100-a-02", "0"


def open_drill(db: Path, monkeypatch: pytest.MonkeyPatch, page: str, **params: str) -> AppTest:
    monkeypatch.setenv(ENV_DB, str(db))
    at = AppTest.from_file(MAIN, default_timeout=60)
    at.query_params.update(params)
    at.run()
    return at.switch_page(page).run()


def chart_titles(at: AppTest) -> set[str]:
    titles = [json.loads(c.proto.spec)["title"] for c in at.get("vega_lite_chart")]
    return {(t["text"] if isinstance(t, dict) else t).split(" (")[0] for t in titles}  # a title with a subtitle


def raw(db: Path, sql: str, params: list[object]) -> list[tuple[object, ...]]:
    con: duckdb.DuckDBPyConnection = connect(db, read_only=True)
    try:
        return con.execute(sql, params).fetchall()
    finally:
        con.close()


def raw_metrics(db: Path, device: str | None) -> set[str]:
    """Metrics with a device-wide sample (or a node-wide one) of the node in the 24 hours, from raw samples."""
    extra, params = ("", []) if device is None else (" AND device = ?", [device])
    return {r[0] for r in raw(db, "SELECT DISTINCT metric FROM samples WHERE pool = ? AND node = ? AND ts >= ? "
                                  f"AND ts < ? AND (device_wide OR metric NOT LIKE 'accelerator.%'){extra}",
                              [POOL, NODE, START, END, *params])}


def xid79_times(db: Path) -> list[int]:
    return sorted(int(r[0]) for r in raw(db, "SELECT ts FROM samples WHERE pool = ? AND node = ? AND ts >= ? "
                                             "AND ts < ? AND metric = 'accelerator.errors' "
                                             "AND json_extract_string(attributes, '$.code') = '79'",
                                         [POOL, NODE, START, END]))


def driver(db: Path) -> str:
    return str(raw(db, "SELECT version FROM versions WHERE pool = ? AND node = ? AND component = 'driver'",
                   [POOL, NODE])[0][0])


def check_page(at: AppTest, db: Path, device: str | None) -> None:
    assert not at.exception, at.exception
    assert not at.error
    expected = raw_metrics(db, device)
    assert "accelerator.utilization" in expected and "accelerator.temperature" in expected
    assert chart_titles(at) == expected  # one chart per canonical metric the node reported
    *_, versions, events = (d.value for d in at.dataframe)  # the Node page lists its devices first
    assert driver(db) in set(versions["version"])
    times = events[events["code"] == "79"]["time"]
    assert sorted(int(t.value // 1_000_000) for t in times) == xid79_times(db) and len(times) >= 1
    assert (events[events["code"] == "79"]["severity"] == "fatal").all()


def test_node_page_shows_the_failing_node(demo_db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    at = open_drill(demo_db, monkeypatch, "screens/node.py", node=NODE, pool=POOL)
    assert at.title[0].value == "Node"
    assert at.markdown[0].value.startswith(f"**{NODE}** · pool **{POOL}** · nvidia NVIDIA H100")
    check_page(at, demo_db, None)


def test_device_page_shows_the_failing_device(demo_db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    at = open_drill(demo_db, monkeypatch, "screens/device.py", node=NODE, pool=POOL, device=DEVICE)
    assert at.title[0].value == "Device"
    assert at.markdown[0].value.startswith(f"**{NODE}** · device **{DEVICE}** · pool **{POOL}**")
    check_page(at, demo_db, DEVICE)
    back = at.get("page_link")[0].proto
    assert back.page == "node" and urllib.parse.parse_qs(back.query_string) == {"node": [NODE], "pool": [POOL]}


def test_nodes_to_drain_link_to_the_node_page(demo_db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_DB, str(demo_db))
    at = AppTest.from_file(MAIN, default_timeout=60).run().switch_page("screens/reliability.py").run()
    drain = at.dataframe[0].value
    page, query = drain["node"][0].split("?")
    assert len(drain) == 1 and page == "node"
    assert urllib.parse.parse_qs(query) == {"node": [NODE], "pool": [POOL], "window": ["24h"]}
    link = at.get("page_link")[0].proto
    assert link.page == "node" and urllib.parse.parse_qs(link.query_string) == {"node": [NODE], "pool": [POOL]}
    opened = open_drill(demo_db, monkeypatch, "screens/node.py",
                        **{k: v[0] for k, v in urllib.parse.parse_qs(query).items()})
    assert opened.markdown[0].value.startswith(f"**{NODE}** · pool **{POOL}**")


def test_worst_devices_and_drifted_nodes_link_to_their_pages(demo_db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_DB, str(demo_db))
    at = AppTest.from_file(MAIN, default_timeout=60).run()
    worst = at.dataframe[1].value
    for pool, node, device in zip(worst["pool"], worst["node"], worst["device"], strict=True):
        page, query = device.split("?")
        assert page == "device"
        params = urllib.parse.parse_qs(query)
        assert params["pool"] == [pool] and params["window"] == ["24h"] and set(params) == {"node", "pool", "device",
                                                                                           "window"}
        assert node == f"node?node={params['node'][0]}&pool={pool}&window=24h"
    assert f"device?node={NODE}&pool={POOL}&device={DEVICE}&window=24h" in set(worst["device"])
    drift = at.dataframe[2].value
    assert set(drift["node"]) == {"node?node=mi300x-a-02&pool=mi300x-a&window=24h",
                                  "node?node=gaudi3-a-01&pool=gaudi3-a&window=24h"}


def test_an_unknown_node_or_device_is_named_with_the_known_ones(demo_db: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    at = open_drill(demo_db, monkeypatch, "screens/node.py", node="h100-a-09", pool=POOL)
    assert not at.exception, at.exception
    known = sorted({str(r[0]) for r in raw(demo_db, "SELECT DISTINCT node FROM samples WHERE pool = ?", [POOL])})
    assert [e.value for e in at.error] == [f"No node named “h100-a-09” has reported in pool {POOL}. "
                                           f"Known nodes: {', '.join(known)}."]
    at = open_drill(demo_db, monkeypatch, "screens/device.py", node=NODE, pool=POOL, device="7")
    assert not at.exception, at.exception
    assert [e.value for e in at.error] == [f"Node {NODE} of pool {POOL} has no device “7”. Its devices: {DEVICE}."]


def test_without_a_node_the_page_offers_a_picker(demo_db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    at = open_drill(demo_db, monkeypatch, "screens/node.py")
    assert not at.exception and not at.error
    assert "Pick a node above" in at.info[0].value
    picker = at.selectbox(key="drill_node")
    picker.select_index(picker.options.index(f"{POOL} · {NODE}")).run()
    assert not at.exception, at.exception
    assert at.query_params["node"] == NODE
    assert at.markdown[0].value.startswith(f"**{NODE}** · pool **{POOL}**")
