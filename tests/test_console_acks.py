"""Acknowledgements under AppTest with a real Alertmanager: a lead silences the demo's failing node from the
Node page, and the silence shows as acknowledged there and on Fleet health; a viewer cannot create one."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from access import AccessDenied, decide, load_roles
from access.identity import Identity
from app.alertmanager import ENV_URL
from app.console.acks import create_node_silence
from tests.amserver import AlertmanagerServer
from tests.logins import LEAD, VIEWER, console, write_roles
from tests.processes import free_port

POOL, NODE = "h100-a", "h100-a-02"  # the demo's failing node: XID 79 on device 0, then silence
COMMENT = "GPU 0 fell off the bus; RMA opened"


@pytest.fixture
def alertmanager(tmp_path: Path) -> Iterator[AlertmanagerServer]:
    am = AlertmanagerServer(tmp_path).start()
    yield am
    am.stop()


def node_page(at: AppTest) -> AppTest:
    at.query_params.update({"node": NODE, "pool": POOL})
    return at.run().switch_page("screens/node.py").run()


def test_a_leads_silence_of_a_node_shows_as_acknowledged(demo_db: Path, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch,
                                                         alertmanager: AlertmanagerServer) -> None:
    write_roles(tmp_path, monkeypatch)
    monkeypatch.setenv(ENV_URL, alertmanager.url)
    at = node_page(console(demo_db, monkeypatch, LEAD))
    assert not at.exception
    assert any(e.value.startswith(":red-background[:material/error: critical] Status **critical**: device 0: 4 fatal "
                                  "error events") and e.value.endswith("Not acknowledged.") for e in at.markdown)
    at.text_input(key="silence.comment").input(COMMENT)
    at.number_input(key="silence.hours").set_value(2.0)
    at.button[0].click()  # the form's submit button
    at.run()
    assert not at.exception, at.exception
    (silence,) = alertmanager.get("/api/v2/silences")
    assert silence["createdBy"] == LEAD["email"] and silence["comment"] == COMMENT
    assert silence["status"]["state"] == "active"
    assert {(m["name"], m["value"]) for m in silence["matchers"]} == {("pool", POOL), ("node", NODE)}
    acked = [i.value for i in at.markdown if "Acknowledged by" in i.value]
    assert acked and f"Acknowledged by {LEAD['email']} until " in acked[0] and acked[0].endswith(COMMENT)
    at.query_params.update({"node": NODE, "pool": POOL, "device": "0"})
    device = at.switch_page("screens/device.py").run()
    assert not device.exception
    assert any(i.value.startswith(":red-background[:material/error: critical] Status **critical**: 4 fatal error "
                                  "events") and i.value.endswith(COMMENT)
               for i in device.markdown)  # the node's silence covers its device
    health = device.switch_page("screens/health.py").run()
    assert not health.exception
    table = health.dataframe[0].value
    mine = table[table["node"].str.contains(f"node={NODE}", regex=False)]
    assert len(mine) == 2  # the node and its device
    assert all(a.startswith(f"acknowledged by {LEAD['email']} until ") and a.endswith(COMMENT)
               for a in mine["acknowledged"])
    others = table[~table["node"].str.contains(f"node={NODE}", regex=False)]
    assert (others["acknowledged"] == "").all()  # the pool-wide status and the other nodes are not covered
    assert any(c.value.startswith(f"2 of {len(table)} statuses that are not ok are acknowledged")
               for c in health.caption)


def test_a_viewer_sees_the_form_disabled_and_the_write_refuses_them(demo_db: Path, tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch,
                                                                    alertmanager: AlertmanagerServer) -> None:
    roles = write_roles(tmp_path, monkeypatch)
    monkeypatch.setenv(ENV_URL, alertmanager.url)
    at = node_page(console(demo_db, monkeypatch, VIEWER))
    assert not at.exception
    assert at.text_input(key="silence.comment").disabled and at.button[0].disabled
    viewer = decide(Identity(VIEWER["email"], "Val", (), "oidc"), load_roles(roles))  # type: ignore[arg-type]
    with pytest.raises(AccessDenied, match="Only a lead can silence a node's alerts"):
        create_node_silence(alertmanager.url, POOL, NODE, COMMENT, 1.0, viewer)
    assert alertmanager.get("/api/v2/silences") == []


def test_an_unreachable_alertmanager_is_said_and_the_statuses_stay(demo_db: Path, monkeypatch: pytest.MonkeyPatch
                                                                   ) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    monkeypatch.setenv(ENV_URL, url)
    at = node_page(console(demo_db, monkeypatch))
    assert not at.exception
    port = url.rsplit(":", 1)[1]
    assert any(w.value.startswith("Acknowledgements are not shown: cannot reach Alertmanager at ") and
               f"127.0.0.1:{port}: " in w.value for w in at.warning)  # the URL escaped, so it is no link
    assert any(e.value.endswith("Not acknowledged.") for e in at.markdown) and not at.error
