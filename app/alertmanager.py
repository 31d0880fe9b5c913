"""The Alertmanager v2 API as hetpool uses it: post alerts, read and create silences.

The HTTP call is injected (`Transport`; the production default is the outbound client, which follows a
redirect only to the same origin and never turns a POST into a GET) and credentials come from the
environment only: HETPOOL_ALERTMANAGER_TOKEN (a bearer token), or HETPOOL_ALERTMANAGER_USER and
HETPOOL_ALERTMANAGER_PASSWORD (basic auth). Neither is ever part of a message.
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlparse

from canonical.redact import redact
from collectors.outbound import Limits, OutboundError, request
from status.silences import Silence, SilenceError, parse_silences

ENV_URL = "HETPOOL_ALERTMANAGER_URL"
ENV_TOKEN, ENV_USER, ENV_PASSWORD = ("HETPOOL_ALERTMANAGER_TOKEN", "HETPOOL_ALERTMANAGER_USER",
                                     "HETPOOL_ALERTMANAGER_PASSWORD")
MAX_ANSWER_BYTES = 64 << 20  # silences and acknowledgements: far below this
# (method, url, body, headers, timeout in s) -> (HTTP status, body); raises OutboundError (or OSError) when
# nothing answers as it should
Transport = Callable[[str, str, bytes | None, Mapping[str, str], float], tuple[int, bytes]]


class AlertmanagerError(Exception):
    """Alertmanager cannot be reached, refused a request, or answered what the API does not."""


def outbound_transport(method: str, url: str, body: bytes | None, headers: Mapping[str, str],
                       timeout_s: float) -> tuple[int, bytes]:
    """One HTTP request within `timeout_s` in all; an HTTP error status is returned, not raised, and a refused
    redirect, a deadline passed or a body over the cap raise OutboundError."""
    with request(method, url, body=body, headers=headers, limits=Limits(deadline_s=timeout_s,
                                                                         max_body_bytes=MAX_ANSWER_BYTES)) as got:
        return got.status, got.read()


@dataclass(frozen=True)
class AmAuth:
    """Bearer token or basic-auth pair from the environment; never printed."""

    token: str | None = field(default=None, repr=False)
    user: str | None = None
    password: str | None = field(default=None, repr=False)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> AmAuth:
        """Read HETPOOL_ALERTMANAGER_TOKEN, or HETPOOL_ALERTMANAGER_USER and HETPOOL_ALERTMANAGER_PASSWORD."""
        env = os.environ if env is None else env
        return cls(env.get(ENV_TOKEN) or None, env.get(ENV_USER) or None, env.get(ENV_PASSWORD) or None)

    def headers(self) -> dict[str, str]:
        """The Authorization header, if any."""
        if self.token:
            return {"Authorization": f"Bearer {self.token}"}
        if self.user:
            pair = base64.b64encode(f"{self.user}:{self.password or ''}".encode()).decode()
            return {"Authorization": f"Basic {pair}"}
        return {}


def check_url(url: str) -> str:
    """The base URL, or AlertmanagerError when it is not http(s)://host[:port][/prefix] without credentials."""
    parsed = urlparse(url)
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise AlertmanagerError(f"bad Alertmanager URL {url!r}; expected http(s)://host:port")
    if parsed.username or parsed.password:
        raise AlertmanagerError(f"credentials do not belong in the Alertmanager URL; set {ENV_TOKEN}, or {ENV_USER} "
                                f"and {ENV_PASSWORD}, in the environment")
    return url.rstrip("/")


class Alertmanager:
    """One Alertmanager (or a cluster behind one URL)."""

    def __init__(self, url: str, auth: AmAuth | None = None, *, transport: Transport = outbound_transport,
                 timeout_s: float = 10.0):
        self.url = check_url(url)
        self.auth = auth if auth is not None else AmAuth.from_env()
        self.transport = transport
        self.timeout_s = timeout_s

    def post_alerts(self, bodies: list[dict[str, Any]] | tuple[dict[str, Any], ...]) -> int:
        """POST /api/v2/alerts: fire, hold or resolve each alert in one request; how many Alertmanager accepted
        (it takes a batch whole with a 2xx answer, or none of it)."""
        self._call("POST", "/api/v2/alerts", list(bodies))
        return len(bodies)

    def silences(self) -> tuple[Silence, ...]:
        """GET /api/v2/silences: every silence it keeps (active, pending and expired)."""
        try:
            return parse_silences(self._call("GET", "/api/v2/silences", None))
        except SilenceError as exc:
            raise AlertmanagerError(f"{self.url}/api/v2/silences: {exc}") from None

    def create_silence(self, body: dict[str, Any]) -> str:
        """POST /api/v2/silences; the new silence's id."""
        got = self._call("POST", "/api/v2/silences", body)
        if not isinstance(got, dict) or "silenceID" not in got:
            raise AlertmanagerError(f"{self.url} did not say which silence it created: {str(got)[:200]}")
        return str(got["silenceID"])

    def _call(self, method: str, path: str, payload: Any) -> Any:
        body = None if payload is None else json.dumps(payload).encode()
        headers = {"Accept": "application/json", **self.auth.headers(),
                   **({"Content-Type": "application/json"} if body is not None else {})}
        try:
            status, raw = self.transport(method, self.url + path, body, headers, self.timeout_s)
        except OutboundError as exc:
            raise AlertmanagerError(f"cannot reach Alertmanager at {self.url}: {redact(exc.why)}") from None
        except OSError as exc:
            reason = getattr(exc, "reason", None) or exc.strerror or exc
            raise AlertmanagerError(f"cannot reach Alertmanager at {self.url}: {redact(str(reason))}") from None
        if not 200 <= status < 300:
            text = redact(raw.decode("utf-8", "replace").strip())[:300]
            raise AlertmanagerError(f"Alertmanager at {self.url} answered HTTP {status} to {method} {path}: {text}")
        if not raw.strip():
            return None
        try:
            return json.loads(raw)
        except ValueError:
            raise AlertmanagerError(f"Alertmanager at {self.url} answered {method} {path} with what is not "
                                    "JSON") from None
