"""The one HTTP client of every outbound call hetpool makes with credentials: exporter scrapes, `hetpool check`,
Alertmanager, and the redirect rule the Prometheus pull's session applies.

A credential never leaves the origin it was configured for: a redirect is followed only to the same scheme,
host and port (the headers go along), one to any other origin is refused, and one that would turn the method
into another (a 301, 302 or 303 answer to anything but GET or HEAD) is an error rather than a silent GET. A
request has one overall deadline, from connecting to the last byte of the body, however slowly the other end
trickles, and a body (after decompression) larger than its cap is refused with the reason.

A request goes through the proxy the environment names for its scheme (`http_proxy`, `https_proxy`, `all_proxy`,
lower case first, as curl reads them) unless `no_proxy` covers its host: a comma-separated list of host names
(each also covering its subdomains, with or without a leading dot), addresses, `host:port` entries and `*`. An
http:// URL is asked of the proxy in absolute form; an https:// one through a CONNECT tunnel, its certificate
checked against the URL's host. The proxy's own credentials (`http://user:password@proxy:3128`) go to the proxy
alone and never into a message.
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import math
import os
import socket
import threading
import time
import zlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from urllib.parse import unquote, urljoin, urlsplit

from collectors.exceptions import CollectorError

DEADLINE_S = 30.0         # a whole request: connect, headers, body
MAX_BODY_BYTES = 256 << 20  # an answer (decompressed) larger than this is refused rather than held
MAX_REDIRECTS = 5
READ_BYTES = 1 << 16
ABORT_POLL_S = 0.1
REDIRECTS = (301, 302, 303, 307, 308)
_KEEPS_METHOD = (307, 308)
_DEFAULT_PORTS = {"http": 80, "https": 443}


class OutboundError(CollectorError):
    """An outbound request that did not get a whole, allowed answer: unreachable, refused redirect, too slow, too
    large. `why` says what happened without the URL, for a caller that names the URL its own way."""

    def __init__(self, url: str, why: str):
        super().__init__(f"{url}: {why}")
        self.url, self.why = url, why


class RedirectRefused(OutboundError):
    """A redirect to another origin, or one that would change the request's method."""


@dataclass(frozen=True)
class Limits:
    """What one request may cost: its overall deadline, its body's size, the redirects it follows."""

    deadline_s: float = DEADLINE_S
    max_body_bytes: int = MAX_BODY_BYTES
    max_redirects: int = MAX_REDIRECTS


def origin(url: str) -> tuple[str, str, int]:
    """(scheme, host, port) of a URL, the port filled in from the scheme."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    try:
        port = parts.port
    except ValueError:
        raise OutboundError(url, "bad port") from None
    return scheme, (parts.hostname or "").lower(), port or _DEFAULT_PORTS.get(scheme, 0)


def redirect_target(url: str, method: str, status: int, location: str | None) -> str:
    """Where a redirect answer may be followed to, or RedirectRefused: only to the origin of `url`, and only when
    the method stays what it was."""
    if not location:
        raise RedirectRefused(url, f"HTTP {status} without a Location to redirect to")
    target = urljoin(url, location.strip())
    if origin(target) != origin(url):
        raise RedirectRefused(url, f"redirected to {_origin_text(target)}, another origin; hetpool follows a "
                              f"redirect only to the same scheme, host and port, so credentials stay where they "
                              f"were configured")
    if status not in _KEEPS_METHOD and method.upper() not in ("GET", "HEAD"):
        raise RedirectRefused(url, f"answered {method} with HTTP {status}, which would turn it into a GET; "
                              f"configure the URL it redirects to ({target})")
    return target


def _origin_text(url: str) -> str:
    scheme, host, port = origin(url)
    return f"{scheme}://{host}:{port}"


Connector = Callable[[str, str, int, float], http.client.HTTPConnection]


def connect(scheme: str, host: str, port: int, timeout_s: float) -> http.client.HTTPConnection:
    """A connection of the URL's scheme (certificates checked with the system's defaults for https)."""
    kind = http.client.HTTPSConnection if scheme == "https" else http.client.HTTPConnection
    return kind(host, port, timeout=timeout_s)


@dataclass(frozen=True)
class Proxy:
    """A forward proxy: where it listens, and the credentials it wants (never printed)."""

    host: str
    port: int
    user: str = ""
    password: str = field(default="", repr=False)

    def text(self) -> str:
        """The proxy as messages name it: without its credentials."""
        return f"http://{self.host}:{self.port}"

    def headers(self) -> dict[str, str]:
        """Proxy-Authorization for a proxy that wants credentials."""
        if not self.user:
            return {}
        pair = f"{self.user}:{self.password}".encode()
        return {"Proxy-Authorization": "Basic " + base64.b64encode(pair).decode("ascii")}


def _env(env: Mapping[str, str], name: str) -> str:
    return (env.get(name) or env.get(name.upper()) or "").strip()


def bypassed(host: str, port: int, no_proxy: str) -> bool:
    """Whether a `no_proxy` list covers the host (and port)."""
    for entry in (e.strip().lower() for e in no_proxy.split(",")):
        if not entry:
            continue
        if entry == "*":
            return True
        name, _, entry_port = entry.rpartition(":") if entry.count(":") == 1 else (entry, "", "")
        if entry_port and entry_port != str(port):
            continue
        name = name.strip("[]").lstrip(".")
        if host == name or host.endswith("." + name):
            return True
    return False


def proxy_for(scheme: str, host: str, port: int, env: Mapping[str, str]) -> Proxy | None:
    """The proxy the environment names for a URL of this scheme and host, or None; OutboundError for a proxy
    setting that cannot be used."""
    setting = _env(env, f"{scheme}_proxy") or _env(env, "all_proxy")
    if not setting or bypassed(host, port, _env(env, "no_proxy")):
        return None
    parts = urlsplit(setting if "://" in setting else f"http://{setting}")
    try:
        proxy_port = parts.port or 80
    except ValueError:
        proxy_port = 0
    if parts.scheme.lower() != "http" or not parts.hostname or not proxy_port:
        shown = f"{parts.scheme}://{parts.hostname or ''}" + (f":{parts.port}" if proxy_port else "")
        raise OutboundError(f"{scheme}_proxy", f"cannot use the proxy {shown}: expected http://host:port (an "
                                               f"https:// proxy is not supported)")
    return Proxy(parts.hostname.lower(), proxy_port, unquote(parts.username or ""), unquote(parts.password or ""))


class Response:
    """A status, its headers, and a body read in bounded chunks before the deadline; close when done."""

    def __init__(self, url: str, conn: http.client.HTTPConnection, raw: http.client.HTTPResponse,
                 deadline: _Deadline, limits: Limits):
        self.url, self._conn, self._raw, self._deadline, self._limits = url, conn, raw, deadline, limits
        self.status, self.reason = int(raw.status), str(raw.reason)
        self.headers = raw.headers

    def header(self, name: str) -> str:
        """One header's value, '' when absent."""
        return str(self.headers.get(name, "") or "")

    def chunks(self, size: int = READ_BYTES) -> Iterator[bytes]:
        """The body, decompressed when it came gzip-encoded, in pieces of at most `size` bytes (a compressed
        body larger than the cap once decompressed is refused as it inflates, not after)."""
        gz = zlib.decompressobj(16 + zlib.MAX_WBITS) if self.header("Content-Encoding").lower() == "gzip" else None
        total = 0
        while True:
            data = self._deadline.run(lambda: self._raw.read1(READ_BYTES), self.url)
            if not data:
                break
            for piece in (data,) if gz is None else _inflate(gz, data, size, self.url):
                total += len(piece)
                if total > self._limits.max_body_bytes:
                    raise OutboundError(self.url, f"answered more than {size_text(self._limits.max_body_bytes)}; "
                                        f"hetpool refuses a larger body rather than hold it")
                yield piece
        if gz is not None and not gz.eof:
            raise OutboundError(self.url, "sent a gzip body that ends early")

    def read(self) -> bytes:
        """The whole body (at most the cap)."""
        return b"".join(self.chunks(READ_BYTES))

    def close(self) -> None:
        """Close the connection and stop its deadline."""
        self._deadline.cancel()
        self._conn.close()

    def __enter__(self) -> Response:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _inflate(gz: zlib._Decompress, data: bytes, size: int, url: str) -> Iterator[bytes]:
    """The pieces one compressed chunk inflates to, at most `size` bytes each."""
    while data:
        try:
            out = gz.decompress(data, size)
        except zlib.error as exc:
            raise OutboundError(url, f"sent a body that is not gzip: {exc}") from None
        if out:
            yield out
        data = gz.unconsumed_tail
        if gz.eof:
            return


def size_text(n: int) -> str:
    """A byte count as messages give it: whole MiB, or bytes below one."""
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n} bytes"


class _Deadline:
    """One request's deadline: a watchdog shuts the socket when it passes (or when `abort()` turns true: the
    service is stopping), so a read blocked on a trickling peer returns; every read is given only the time left."""

    def __init__(self, seconds: float, clock: Callable[[], float], abort: Callable[[], bool] | None = None):
        self.seconds, self.clock, self.abort = seconds, clock, abort
        self.end = clock() + seconds
        self._conn: http.client.HTTPConnection | None = None
        self._done = threading.Event()
        self.passed = self.aborted = False

    def watch(self, conn: http.client.HTTPConnection) -> None:
        """Shut `conn`'s socket when the deadline passes or the caller aborts."""
        self.cancel()
        self._conn, self._done = conn, threading.Event()
        threading.Thread(target=self._watch, args=(conn, self._done), name="outbound-deadline", daemon=True).start()

    def _watch(self, conn: http.client.HTTPConnection, done: threading.Event) -> None:
        step = ABORT_POLL_S if self.abort is not None else None
        while not done.wait(min(step or math.inf, max(0.0, self.end - self.clock()))):
            if self.abort is not None and self.abort():
                self.aborted = True
            elif self.clock() < self.end:
                continue
            self.passed = True
            if conn.sock is not None:
                with contextlib.suppress(OSError):
                    conn.sock.shutdown(socket.SHUT_RDWR)
            return

    def left(self) -> float:
        """Seconds left, never below a millisecond."""
        return max(0.001, self.end - self.clock())

    def late(self, url: str) -> OutboundError:
        if self.aborted:
            return OutboundError(url, "stopped waiting for the answer: the service is stopping")
        return OutboundError(url, f"no whole answer within {self.seconds:g} s")

    def run(self, step: Callable[[], bytes], url: str) -> bytes:
        """One blocking step of the exchange, within the time left."""
        if self.clock() >= self.end:
            self.passed = True
        if not self.passed and self._conn is not None and self._conn.sock is not None:
            self._conn.sock.settimeout(self.left())
        try:
            if self.passed:
                raise TimeoutError
            out = step()
        except (OSError, http.client.HTTPException) as exc:
            if self.passed or isinstance(exc, TimeoutError) or self.clock() >= self.end:
                raise self.late(url) from None
            raise OutboundError(url, f"broke off: {_reason(exc)}") from None
        if self.passed:
            raise self.late(url)
        return out

    def cancel(self) -> None:
        """Stop the watchdog."""
        self._done.set()


def _reason(exc: BaseException) -> str:
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    return str(exc) or type(exc).__name__


def request(method: str, url: str, *, body: bytes | None = None, headers: Mapping[str, str] | None = None,
            limits: Limits = Limits(), clock: Callable[[], float] = time.monotonic,
            connect: Connector = connect, abort: Callable[[], bool] | None = None,
            env: Mapping[str, str] | None = None) -> Response:
    """Send one request and return its final answer (redirects to the same origin followed, any other refused);
    HTTP error statuses are returned, not raised. Close the response (it is a context manager). `abort`, when
    given, is asked every ABORT_POLL_S: true ends the request at once (a service stopping). The proxy settings
    are read from `env` (default: the process's environment)."""
    deadline = _Deadline(limits.deadline_s, clock, abort)
    sent = dict(headers or {})
    for _hop in range(limits.max_redirects + 1):
        scheme, host, port = origin(url)
        if scheme not in _DEFAULT_PORTS or not host:
            raise OutboundError(url, "not an http(s)://host[:port]/path URL")
        parts = urlsplit(url)
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        proxy = proxy_for(scheme, host, port, os.environ if env is None else env)
        asked = sent
        if proxy is None:
            conn = connect(scheme, host, port, deadline.left())
        elif scheme == "https":  # a tunnel: the proxy sees neither the request nor its credentials
            conn = connect("https", proxy.host, proxy.port, deadline.left())
            conn.set_tunnel(host, port, headers=proxy.headers())
        else:  # the absolute form, as a forward proxy takes it
            conn = connect("http", proxy.host, proxy.port, deadline.left())
            target, asked = urlsplit(url)._replace(fragment="").geturl(), {**sent, **proxy.headers()}
        via = "" if proxy is None else f" (through the proxy {proxy.text()})"
        deadline.watch(conn)
        try:
            try:
                conn.connect()
            except OSError as exc:
                if deadline.passed:
                    raise deadline.late(url) from None
                raise OutboundError(url, _reason(exc) + via) from None
            raw = _exchange(deadline, conn, method, target, body, asked, url)
        except BaseException:
            deadline.cancel()
            conn.close()
            raise
        if raw.status not in REDIRECTS:
            return Response(url, conn, raw, deadline, limits)
        location = raw.headers.get("Location")
        deadline.cancel()
        conn.close()
        url = redirect_target(url, method, raw.status, location)
    deadline.cancel()
    raise OutboundError(url, f"redirected more than {limits.max_redirects} times")


def _exchange(deadline: _Deadline, conn: http.client.HTTPConnection, method: str, target: str,
              body: bytes | None, headers: Mapping[str, str], url: str) -> http.client.HTTPResponse:
    """Send the request and read the answer's status line and headers, within the deadline."""
    got: list[http.client.HTTPResponse] = []

    def step() -> bytes:
        conn.request(method, target, body=body, headers=dict(headers))
        got.append(conn.getresponse())
        return b""
    deadline.run(step, url)
    return got[0]
