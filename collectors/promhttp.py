"""Talking to a Prometheus-API store: credentials from the environment, bounded retries, raw range vectors."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from urllib.parse import urlparse

import requests
from prometheus_api_client import PrometheusConnect
from urllib3.util.retry import Retry

from collectors.exceptions import CollectorError
from collectors.outbound import MAX_BODY_BYTES, READ_BYTES, RedirectRefused, redirect_target, size_text
from collectors.promjson import RangeVector, ResponseError, parse_matrix

ENV_TOKEN = "HETPOOL_PROM_TOKEN"
ENV_USER = "HETPOOL_PROM_USER"
ENV_PASSWORD = "HETPOOL_PROM_PASSWORD"
ENV_CA = "HETPOOL_PROM_CA_BUNDLE"


class PromUnavailable(CollectorError):
    """The server cannot be used at all: bad URL, refused connection, failed authentication."""


class ChunkFailed(CollectorError):
    """One query kept failing after every retry."""


@dataclass(frozen=True)
class PromAuth:
    """Bearer token or basic-auth pair; never printed."""

    token: str | None = field(default=None, repr=False)
    user: str | None = None
    password: str | None = field(default=None, repr=False)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> PromAuth:
        """Read HETPOOL_PROM_TOKEN, or HETPOOL_PROM_USER and HETPOOL_PROM_PASSWORD."""
        env = os.environ if env is None else env
        return cls(env.get(ENV_TOKEN) or None, env.get(ENV_USER) or None, env.get(ENV_PASSWORD) or None)

    def headers(self) -> dict[str, str]:
        """Authorization header for a bearer token."""
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    def basic(self) -> tuple[str, str] | None:
        """Basic-auth pair for requests."""
        return (self.user, self.password or "") if self.user else None


@dataclass(frozen=True)
class RetryPolicy:
    """How hard to try one query before its chunk is reported missing, and what one attempt may cost: the wait
    for any one read (`timeout_s`), the whole answer's time however slowly it trickles (`deadline_s`, overshot by
    at most one read's wait) and its size once decompressed (`max_body_bytes`, the outbound client's cap)."""

    attempts: int = 4
    backoff_s: float = 0.5
    max_backoff_s: float = 8.0
    timeout_s: float = 60.0
    deadline_s: float = 300.0
    max_body_bytes: int = MAX_BODY_BYTES


class _Late(Exception):
    """An answer still arriving when its attempt's deadline passed."""


class _TooLarge(Exception):
    """An answer larger than the cap: a later attempt would get the same."""


class _Refused(requests.RequestException):
    """A redirect the outbound rule refuses, raised inside requests so every caller's handling applies."""


def same_origin_only(response: requests.Response, *_args: object, **_kwargs: object) -> requests.Response:
    """A response hook: refuse a redirect to another origin, or one that changes the method, before requests
    follows it (requests strips the Authorization header across hosts, but not basic auth on a port change,
    and turns a POST into a GET)."""
    if response.is_redirect:
        try:
            redirect_target(response.url, response.request.method or "GET", response.status_code,
                            response.headers.get("Location"))
        except RedirectRefused as exc:
            response.close()
            raise _Refused(exc.why) from None
    return response


def _describe(exc: BaseException) -> str:
    text = str(exc)
    if isinstance(exc, _Refused):
        return text
    if isinstance(exc, requests.exceptions.SSLError):
        why = "certificate verify failed" if "CERTIFICATE_VERIFY_FAILED" in text else "TLS handshake failed"
        return f"{why}; set {ENV_CA} to the server's CA file (or pass --insecure)"
    if "Connection refused" in text or "NewConnectionError" in text:
        return "connection refused"
    if isinstance(exc, requests.Timeout):
        return "timed out"
    if isinstance(exc, requests.ConnectionError):
        return "connection failed (closed or reset)"
    return type(exc).__name__


class PromClient:
    """A Prometheus HTTP API client with every edge injectable: session, sleep, retry policy."""

    def __init__(self, url: str, auth: PromAuth | None = None, *, verify: bool | str = True,
                 session: requests.Session | None = None, retry: RetryPolicy | None = None,
                 sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.monotonic):
        parsed = urlparse(url)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise PromUnavailable(f"bad Prometheus URL {url!r}; expected http(s)://host:port")
        self.url = url.rstrip("/")
        self.auth = auth or PromAuth()
        self.retry = retry or RetryPolicy()
        self.sleep = sleep
        self.clock = clock
        self.session = session or requests.Session()
        self.session.verify = os.environ.get(ENV_CA, verify) if verify is True else verify
        self.session.hooks["response"].append(same_origin_only)
        # our own loop retries with backoff and accounting, so the library's adapter must not retry too
        self.prom = PrometheusConnect(url=self.url, headers=self.auth.headers(), auth=self.auth.basic(),
                                      session=self.session, retry=Retry(total=0, raise_on_status=False),
                                      timeout=self.retry.timeout_s)

    def check(self) -> None:
        """Fail fast, with one clear line, when the server is unreachable or refuses our credentials."""
        try:
            ok = self.prom.check_prometheus_connection()
        except requests.RequestException as exc:
            raise PromUnavailable(f"cannot reach Prometheus at {self.url}: {_describe(exc)}") from None
        if not ok:
            status = self._get("/api/v1/status/buildinfo", {}).status_code
            if status in (401, 403):
                raise PromUnavailable(f"Prometheus at {self.url} refused the credentials (HTTP {status}); "
                                      f"check {ENV_TOKEN} or {ENV_USER}/{ENV_PASSWORD}")
            raise PromUnavailable(f"Prometheus at {self.url} answered HTTP {status} to a health check")

    def metric_names(self) -> list[str]:
        """Every metric name the server holds (the __name__ label's values)."""
        try:
            return [str(n) for n in self.prom.get_label_values("__name__")]
        except requests.RequestException as exc:
            raise PromUnavailable(f"cannot list metrics at {self.url}: {_describe(exc)}") from None
        except Exception as exc:  # the library raises its own exception type on non-200 answers
            raise PromUnavailable(f"cannot list metrics at {self.url}: {str(exc)[:200]}") from None

    def _get(self, path: str, params: dict[str, str], *, stream: bool = False) -> requests.Response:
        # verify is passed explicitly: left to requests, $REQUESTS_CA_BUNDLE would override the session's choice
        return self.session.get(f"{self.url}{path}", params=params, headers=self.auth.headers(),
                                auth=self.auth.basic(), timeout=self.retry.timeout_s, verify=self.session.verify,
                                stream=stream)

    def _body(self, resp: requests.Response, started: float) -> bytes:
        """The answer's body, decompressed, read as it arrives: _TooLarge past the cap, _Late past the deadline
        (each read returns what has arrived, so a trickle is cut at the deadline, not at its end)."""
        cap, parts, size = self.retry.max_body_bytes, [], 0
        try:
            while part := resp.raw.read1(READ_BYTES, decode_content=True):
                size += len(part)
                if size > cap:
                    raise _TooLarge(f"answered more than {size_text(cap)} once decompressed")
                if self.clock() - started > self.retry.deadline_s:
                    raise _Late(f"no whole answer within {self.retry.deadline_s:g} s")
                parts.append(part)
        finally:
            resp.close()
        return b"".join(parts)

    def range_vector(self, selector: str, start_ms: int, end_ms: int) -> RangeVector:
        """All raw samples with start_ms < ts <= end_ms, via an instant query of a range selector."""
        if end_ms <= start_ms:
            return RangeVector.empty()
        # Prometheus 2.x range selectors include both ends and 3.x excludes the start, so the points at
        # exactly start_ms are dropped here to get (start, end] from either.
        query = f"{selector}[{end_ms - start_ms}ms]"
        return self._matrix("/api/v1/query", {"query": query, "time": f"{end_ms / 1000:.3f}"}, query,
                            f"{selector} ({start_ms}, {end_ms}]", start_ms)

    def step_vector(self, selector: str, start_ms: int, end_ms: int, step_ms: int) -> RangeVector:
        """One point per step: the selector evaluated at every multiple of `step_ms` in (start_ms, end_ms].

        A range query: each point is the newest sample at or before its step (within the server's lookback),
        stamped with the step's time, so any chunking of a window gives the same points.
        """
        first = start_ms - start_ms % step_ms + step_ms
        if end_ms < first:
            return RangeVector.empty()
        params = {"query": selector, "start": f"{first / 1000:.3f}", "end": f"{end_ms / 1000:.3f}",
                  "step": f"{step_ms / 1000:.3f}"}
        return self._matrix("/api/v1/query_range", params, selector,
                            f"{selector} ({start_ms}, {end_ms}] every {step_ms} ms", start_ms)

    def _matrix(self, path: str, params: dict[str, str], query: str, what: str, after_ms: int) -> RangeVector:
        """A matrix answer, retried with backoff on errors a later attempt may not meet."""
        last = ""
        for attempt in range(self.retry.attempts):
            if attempt:
                self.sleep(min(self.retry.backoff_s * 2 ** (attempt - 1), self.retry.max_backoff_s))
            started = self.clock()
            try:
                resp = self._get(path, params, stream=True)
                status = resp.status_code
                body = self._body(resp, started)
            except requests.RequestException as exc:
                last = _describe(exc)
                continue
            except _Late as exc:
                last = str(exc)
                continue
            except _TooLarge as exc:
                raise ChunkFailed(f"query {what}: {exc}; pull shorter chunks (--chunk)") from None
            if status in (401, 403):
                raise PromUnavailable(f"Prometheus at {self.url} refused the credentials (HTTP {status})")
            if status >= 500 or status == 429:
                last = f"HTTP {status}"
                continue
            if status != 200:
                raise ChunkFailed(f"query {query!r} failed: HTTP {status}: "
                                  f"{body[:200].decode('utf-8', 'replace')}")
            try:
                return parse_matrix(body, after_ms=after_ms)
            except ResponseError as exc:
                raise ChunkFailed(f"query {query!r}: {exc}") from None
        raise ChunkFailed(f"query {what} failed after {self.retry.attempts} attempts: {last}")
