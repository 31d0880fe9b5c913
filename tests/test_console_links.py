"""Links to the Node and Device pages: URLs that encode untrusted names, the name a table cell shows for its link,
and every table of the small demo that names a node or device, followed to the page it opens.

The demo's story (app/demo/story.py) plants what the goldens name: h100-a-02 fails (XID 79 on its device 0),
the last mi300x-a node and the first gaudi3-a node drift to drivers 6.12.12 and 1.22.2, the last ascend-a node's
exporter upgrade drops a metric, and only mlu370-a-01 of the onboarding pool reports.
"""

from __future__ import annotations

import json
import re
import shutil
import urllib.parse
from pathlib import Path

import numpy as np
import pandas as pd
import polars as pl
import pytest
from hypothesis import given
from hypothesis import strategies as st
from streamlit.testing.v1 import AppTest

from app.console.links import DEVICE_TEXT, NODE_TEXT, url
from app.console.safe import md
from store import ENV_DB, Held, IngestRun, commit_run, connect
from tests.test_console_drill import open_drill, raw
from tests.test_console_pages import END, MAIN, START

HOSTILE, HOSTILE_DEVICE = "<img src=x onerror=alert(1)>", "0&pool=x"
HOSTILE_URL = "node?node=%3Cimg+src%3Dx+onerror%3Dalert%281%29%3E&pool=h100-a&window=24h"


def shown(link: str, pattern: str) -> str:
    """The text Streamlit's LinkColumn draws for a link: the pattern's group, '+' as a space, percent-decoded."""
    found = re.search(pattern, link)
    assert found, link
    return urllib.parse.unquote(found.group(1).replace("+", "%20"))


def bare_tag(text: str) -> bool:
    """Whether Markdown text holds an unescaped '<', which could open an HTML tag."""
    return re.search(r"(?<!\\)<", text) is not None


def query(link: str) -> tuple[str, dict[str, str]]:
    """The page and the query parameters a relative link opens."""
    page, _, rest = link.partition("?")
    parsed = urllib.parse.parse_qs(rest, keep_blank_values=True, strict_parsing=True)
    assert all(len(v) == 1 for v in parsed.values()), link
    return page, {k: v[0] for k, v in parsed.items()}


@pytest.mark.parametrize(("node", "device", "expected"), [
    ("h100-a-02", None, "node?node=h100-a-02&pool=p"),
    ("h100-a-02", "0", "device?node=h100-a-02&pool=p&device=0"),
    (HOSTILE, None, "node?node=%3Cimg+src%3Dx+onerror%3Dalert%281%29%3E&pool=p"),
    ("n", HOSTILE_DEVICE, "device?node=n&pool=p&device=0%26pool%3Dx"),
    ("a b+c", "100%", "device?node=a+b%2Bc&pool=p&device=100%25"),
    ("[x](javascript:alert(1))", None, "node?node=%5Bx%5D%28javascript%3Aalert%281%29%29&pool=p"),
    ("узел-1", None, "node?node=%D1%83%D0%B7%D0%B5%D0%BB-1&pool=p"),
])
def test_a_link_encodes_the_name_and_shows_it_back(node: str, device: str | None, expected: str) -> None:
    link = url("p", node, device)
    assert link == expected
    assert shown(link, NODE_TEXT) == node
    if device is not None:
        assert shown(link, DEVICE_TEXT) == device


def test_a_link_carries_the_window_after_the_names() -> None:
    link = url("p", "n", "0", {"window": "days", "from": "2026-11-28", "to": "2026-11-29"})
    assert link == "device?node=n&pool=p&device=0&window=days&from=2026-11-28&to=2026-11-29"


names = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1)


@given(pool=names, node=names, device=names)
def test_any_name_survives_the_link(pool: str, node: str, device: str) -> None:
    page, params = query(url(pool, node, device, {"window": "7d"}))
    assert (page, params) == ("device", {"node": node, "pool": pool, "device": device, "window": "7d"})
    assert shown(url(pool, node, device), NODE_TEXT) == node
    assert shown(url(pool, node, device), DEVICE_TEXT) == device


def tables(at: AppTest) -> list[pd.DataFrame]:
    return [d.value for d in at.dataframe]


def with_columns(at: AppTest, *names: str) -> list[pd.DataFrame]:
    return [t for t in tables(at) if list(t.columns[:len(names)]) == list(names)]


def follow(db: Path, monkeypatch: pytest.MonkeyPatch, link: str) -> AppTest:
    """Open the page a table's link names with the link's own query parameters."""
    page, params = query(link)
    at = open_drill(db, monkeypatch, f"screens/{page}.py", **params)
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    return at


def open_page(db: Path, monkeypatch: pytest.MonkeyPatch, page: str) -> AppTest:
    monkeypatch.setenv(ENV_DB, str(db))
    at = AppTest.from_file(MAIN, default_timeout=60).run().switch_page(page).run()
    assert not at.exception, at.exception
    return at


def test_versions_link_the_drifted_nodes_and_the_node_that_lost_a_metric(demo_db: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    at = open_page(demo_db, monkeypatch, "screens/versions.py")
    drifted = {(row["node"], row["version"]) for t in with_columns(at, "node", "version", "devices")
               for _, row in t.iterrows()}
    assert drifted == {("node?node=mi300x-a-02&pool=mi300x-a&window=24h", "6.12.12"),
                       ("node?node=gaudi3-a-01&pool=gaudi3-a&window=24h", "1.22.2"),
                       ("node?node=ascend-a-02&pool=ascend-a&window=24h", "v6.0.1")}
    lost = [w.value for w in at.warning if "stopped after the exporter" in w.value]
    assert lost and all(" on [ascend-a-02](node?node=ascend-a-02&pool=ascend-a&window=24h) (" in v for v in lost)
    per_node = with_columns(at, "pool", "node", "exporter", "count")[0]
    nodes = {(pool, query(link)[1]["node"]) for pool, link in zip(per_node["pool"], per_node["node"], strict=True)}
    assert nodes == set(raw(demo_db, "SELECT DISTINCT pool, node FROM samples WHERE ts >= ? AND ts < ?",
                            [START, END]))
    upgraded = per_node[per_node["node"] == "node?node=ascend-a-02&pool=ascend-a&window=24h"]
    assert list(upgraded["exporter"]) == ["v6.0.0", "v6.0.1"] and upgraded["count"].is_monotonic_decreasing
    opened = follow(demo_db, monkeypatch, "node?node=mi300x-a-02&pool=mi300x-a&window=24h")
    assert opened.markdown[0].value.startswith("**mi300x-a-02** · pool **mi300x-a** · amd")
    versions = with_columns(opened, "component", "declared", "version")[0]
    assert "6.12.12" in set(versions[versions["component"] == "driver"]["version"])


def test_error_tables_link_every_node_and_device_of_the_store(demo_db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    at = open_page(demo_db, monkeypatch, "screens/reliability.py")
    drain = with_columns(at, "pool", "node", "reasons")[0]
    assert list(drain["node"]) == ["node?node=h100-a-02&pool=h100-a&window=24h"]
    events = with_columns(at, "time", "pool", "vendor", "node", "device")[0]
    got = set()
    for pool, node, device in zip(events["pool"], events["node"], events["device"], strict=True):
        page, params = query(node)
        assert page == "node" and set(params) == {"node", "pool", "window"} and params["pool"] == pool
        assert shown(node, NODE_TEXT) == params["node"]
        if device:  # a node-wide event has a blank device, without a link
            assert query(device) == ("device", {**params, "device": shown(device, DEVICE_TEXT)})
        got.add((pool, params["node"], shown(device, DEVICE_TEXT) if device else ""))
    stored = raw(demo_db, "SELECT DISTINCT pool, node, device FROM samples WHERE metric = 'accelerator.errors' "
                          "AND ts >= ? AND ts < ?", [START, END])
    assert got == set(stored) and len(got) > 3
    xid = events[events["code"] == "79"]["device"]
    assert set(xid) == {"device?node=h100-a-02&pool=h100-a&device=0&window=24h"}
    opened = follow(demo_db, monkeypatch, xid.iloc[0])
    assert opened.title[0].value == "Device"
    assert opened.markdown[0].value.startswith("**h100-a-02** · device **0** · pool **h100-a**")


def test_fleet_health_statuses_link_their_node_and_device(demo_db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    at = open_page(demo_db, monkeypatch, "screens/health.py")
    statuses = with_columns(at, "level", "scope", "pool", "node", "device")[0]
    rows = set(zip(statuses["level"], statuses["scope"], statuses["node"], statuses["device"], strict=True))
    assert ("critical", "device", "node?node=h100-a-02&pool=h100-a&window=24h",
            "device?node=h100-a-02&pool=h100-a&device=0&window=24h") in rows
    pool_rows = statuses[statuses["scope"] == "pool"]
    assert len(pool_rows) and (pool_rows["node"] == "").all() and (pool_rows["device"] == "").all()


def test_the_node_page_lists_its_devices_and_reads_a_dash_for_missing_versions(
        demo_db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    at = open_drill(demo_db, monkeypatch, "screens/node.py", node="h100-a-02", pool="h100-a", window="24h")
    assert not at.exception, at.exception
    assert at.markdown[0].value.endswith(" · stage production")  # not onboarded: the declared stage
    siblings = [c.value for c in at.caption if c.value.startswith("Registry ")]
    assert siblings and "reported: [h100-a-01](node?node=h100-a-01&pool=h100-a&window=24h)." in siblings[0]
    devices = with_columns(at, "device", "first_seen", "last_seen")[0]
    assert list(devices["device"]) == ["device?node=h100-a-02&pool=h100-a&device=0&window=24h"]
    versions = with_columns(at, "component", "declared", "version")[0]
    cuda = versions[versions["component"] == "cuda"].iloc[0]  # declared 12.4, reported by no exporter
    assert (cuda["declared"], cuda["version"], cuda["first_seen"], cuda["last_seen"], cuda["device"]) == (
        "12.4", "–", "–", "–", "")
    assert not versions.isna().any().any() and "None" not in set(versions.astype(str).to_numpy().ravel())
    events = with_columns(at, "time", "device", "code")[0]
    assert set(events["device"]) == {"device?node=h100-a-02&pool=h100-a&device=0&window=24h"}
    opened = follow(demo_db, monkeypatch, devices["device"].iloc[0])
    assert opened.markdown[0].value.startswith("**h100-a-02** · device **0** · pool **h100-a**")


def test_the_node_page_shows_the_trackers_stage_of_an_onboarding_pool(demo_db: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    at = open_drill(demo_db, monkeypatch, "screens/device.py", node="mlu370-a-01", pool="mlu370-a", device="0")
    assert not at.exception, at.exception
    # the tracker's current stage (the Onboarding page's progress bar), not only the registry's declared one
    assert at.markdown[0].value.endswith(" · onboarding stage **inference bring-up** (1 of 6 stages done; "
                                         "declared exporter)")
    assert any("no other node of it reported" in c.value for c in at.caption)


def test_the_onboarding_stability_table_links_each_device(demo_db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    at = open_page(demo_db, monkeypatch, "screens/onboarding.py")
    assert at.selectbox(key="onboarding_detail").value == "mlu370-a"
    trend = with_columns(at, "node", "device", "points", "growth")[0]
    assert list(zip(trend["node"], trend["device"], strict=True)) == [
        ("node?node=mlu370-a-01&pool=mlu370-a&window=24h",
         "device?node=mlu370-a-01&pool=mlu370-a&device=0&window=24h")]
    # the memory trend, from raw samples: a least-squares line through the hourly means since the first sample
    # (the pool had no fatal error), its rise over the span divided by the mean
    hourly = raw(demo_db, "SELECT ts // 3600000 AS h, avg(value) FROM samples WHERE pool = 'mlu370-a' AND "
                          "node = 'mlu370-a-01' AND device = '0' AND metric = 'accelerator.memory.used' "
                          "GROUP BY h ORDER BY h", [])
    hours = np.array([float(h) for h, _ in hourly]) - float(hourly[0][0])  # type: ignore[arg-type]
    used = np.array([float(v) for _, v in hourly])  # type: ignore[arg-type]
    growth = np.polyfit(hours, used, 1)[0] * hours[-1] / used.mean()
    assert list(trend["points"]) == [len(hourly)] and len(hourly) >= 3
    assert trend["growth"].iloc[0] == pytest.approx(growth, rel=1e-6)
    assert list(trend["leaks"]) == [growth > 0.05]


@pytest.fixture(scope="module")
def hostile_db(demo_db: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo with a node and a device named like markup on h100-a: a fatal event, utilization, a driver."""
    db = tmp_path_factory.mktemp("hostile") / "demo.duckdb"
    shutil.copyfile(demo_db, db)
    ts = [END - 3_600_000 + i * 60_000 for i in range(30)]
    fatal = json.dumps({"code": "79", "error_class": "device_lost", "severity": "fatal"}, sort_keys=True)
    rows = pl.DataFrame({"ts": [*ts, ts[-1]], "pool": "h100-a", "node": HOSTILE, "device": HOSTILE_DEVICE,
                         "metric": ["accelerator.utilization"] * 30 + ["accelerator.errors"],
                         "value": [0.5] * 30 + [1.0], "attributes": ["{}"] * 30 + [fatal]})
    run = IngestRun("file", "planted")
    run.add_read(rows.height)
    run.add_samples(rows)
    run.add_versions(pl.DataFrame({"pool": ["h100-a"], "node": [HOSTILE], "device": [""], "component": ["driver"],
                                   "version": ["999.1"], "ts": [ts[0]]}))
    con = connect(db)
    commit_run(Held(con), run)
    con.close()
    return db


def test_a_hostile_name_is_encoded_in_links_and_shown_as_text(hostile_db: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    at = open_page(hostile_db, monkeypatch, "screens/reliability.py")
    drain = with_columns(at, "pool", "node", "reasons")[0]
    assert HOSTILE_URL in set(drain["node"]) and shown(HOSTILE_URL, NODE_TEXT) == HOSTILE
    events = with_columns(at, "time", "pool", "vendor", "node", "device")[0]
    planted = events[events["node"] == HOSTILE_URL]["device"]
    link = "device?node=%3Cimg+src%3Dx+onerror%3Dalert%281%29%3E&pool=h100-a&device=0%26pool%3Dx&window=24h"
    assert list(planted) == [link] and shown(link, DEVICE_TEXT) == HOSTILE_DEVICE
    labels = {link.proto.label for link in at.get("page_link")}
    assert f"Node {md(HOSTILE)} (h100-a)" in labels and not any(bare_tag(label) for label in labels)
    node = follow(hostile_db, monkeypatch, HOSTILE_URL)
    header = node.markdown[0].value
    assert header.startswith(r"**\<img src=x onerror=alert(1)\>** · pool **h100-a**") and not bare_tag(header)
    device = follow(hostile_db, monkeypatch, link)
    assert device.markdown[0].value.startswith(f"**{md(HOSTILE)}** · device **{md(HOSTILE_DEVICE)}** · pool")
    assert device.get("page_link")[0].proto.label == f"Node {md(HOSTILE)}"
    peer = open_drill(hostile_db, monkeypatch, "screens/node.py", node="h100-a-01", pool="h100-a", window="24h")
    caption = next(c.value for c in peer.caption if c.value.startswith("Registry "))
    assert f"[{md(HOSTILE)}]({HOSTILE_URL})" in caption and not bare_tag(caption)
