"""The Alertmanager client (app/alertmanager.py) against loopback servers: credentials from the environment only,
sent as headers and never in a message; refusals, odd answers and a down server are one sentence each."""

from __future__ import annotations

import base64
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from app.alertmanager import Alertmanager, AlertmanagerError, AmAuth
from tests.amserver import AlertmanagerServer
from tests.processes import free_port

TOKEN = "am-t0ken-value"


class Recorder:
    """A loopback server answering every request with one status and body, keeping the headers it got."""

    def __init__(self, status: int, body: bytes):
        seen: list[dict[str, str]] = []
        self.seen = seen

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                seen.append(dict(self.headers))
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                self.send_response(status)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = _answer

            def log_message(self, format: str, *args: Any) -> None:
                return

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def recorder(request: pytest.FixtureRequest) -> Iterator[Recorder]:
    status, body = getattr(request, "param", (200, b""))
    r = Recorder(status, body)
    yield r
    r.close()


@pytest.mark.parametrize(("env", "header"), [
    ({"HETPOOL_ALERTMANAGER_TOKEN": TOKEN}, f"Bearer {TOKEN}"),
    ({"HETPOOL_ALERTMANAGER_USER": "ops", "HETPOOL_ALERTMANAGER_PASSWORD": "pw"},
     "Basic " + base64.b64encode(b"ops:pw").decode()),
    ({}, None),
], ids=["bearer", "basic", "none"])
def test_credentials_come_from_the_environment_as_a_header(recorder: Recorder, env: dict[str, str],
                                                           header: str | None) -> None:
    auth = AmAuth.from_env(env)
    assert TOKEN not in repr(auth) and "pw" not in repr(auth)
    Alertmanager(recorder.url, auth).post_alerts([])
    assert recorder.seen[0].get("Authorization") == header
    assert recorder.seen[0]["Content-Type"] == "application/json"


@pytest.mark.parametrize(("recorder", "call", "message"), [
    ((400, f'{{"message": "bad alert", "token": "{TOKEN}"}}'.encode()), "post",
     "answered HTTP 400 to POST /api/v2/alerts: "),
    ((200, b"<html>"), "silences", "answered GET /api/v2/silences with what is not JSON"),
    ((200, b'{"silences": []}'), "silences", "/api/v2/silences: expected a list of silences, got dict"),
    ((200, b"{}"), "create", "did not say which silence it created"),
], indirect=["recorder"], ids=["refused", "not-json", "not-a-list", "no-id"])
def test_odd_answers_are_one_sentence_without_the_credential(recorder: Recorder, call: str, message: str) -> None:
    client = Alertmanager(recorder.url, AmAuth(TOKEN))
    with pytest.raises(AlertmanagerError) as caught:
        {"post": lambda: client.post_alerts([{}]), "silences": client.silences,
         "create": lambda: client.create_silence({})}[call]()
    assert message in str(caught.value) and TOKEN not in str(caught.value)


def test_a_down_alertmanager_and_a_bad_url_are_named() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(AlertmanagerError, match=f"cannot reach Alertmanager at {url}: "):
        Alertmanager(url, AmAuth()).silences()
    with pytest.raises(AlertmanagerError, match="credentials do not belong in the Alertmanager URL"):
        Alertmanager("http://ops:pw@am:9093")


def test_a_silence_created_is_read_back_from_a_real_alertmanager(tmp_path: Path) -> None:
    am = AlertmanagerServer(tmp_path).start()
    try:
        client = Alertmanager(am.url, AmAuth())
        body = {"matchers": [{"name": "node", "value": "n1", "isRegex": False, "isEqual": True}],
                "startsAt": "2026-01-01T00:00:00Z", "endsAt": "2099-01-01T00:00:00Z", "createdBy": "ana",
                "comment": "on it"}
        made = client.create_silence(body)
        (got,) = client.silences()
    finally:
        am.stop()
    assert (got.id, got.created_by, got.comment, got.state) == (made, "ana", "on it", "active")
