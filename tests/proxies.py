"""Loopback HTTP proxies in front of a real server: one that misbehaves on schedule, one that demands auth."""

from __future__ import annotations

import ssl
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

# What to do with the n-th request (0-based): "ok", "500", "slow" (answer after the client gave up), "drop",
# "warn" (answer with a partial-response warning added), "trickle" (a byte every 20 ms for slow_s, never whole).
Plan = Callable[[int, str], str]


class _Proxy:
    """Forwards GET and POST to upstream; subclasses decide per request whether to misbehave."""

    def __init__(self, upstream: str, tls: tuple[Path, Path] | None = None):
        self.upstream = upstream.rstrip("/")
        self.requests: list[tuple[str, str]] = []  # (path, action) in arrival order
        self._lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                proxy._handle(self, None)

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                proxy._handle(self, body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        scheme = "http"
        if tls is not None:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(*tls)
            self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
            scheme = "https"
        self.url = f"{scheme}://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> _Proxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def action(self, n: int, handler: BaseHTTPRequestHandler) -> str:
        """What to do with request n."""
        return "ok"

    def _handle(self, handler: BaseHTTPRequestHandler, body: bytes | None) -> None:
        with self._lock:
            n = len(self.requests)
            act = self.action(n, handler)
            self.requests.append((handler.path, act))
        if act == "drop":
            handler.close_connection = True
            handler.connection.close()
            return
        if act == "500":
            self._reply(handler, 500, b'{"status":"error","error":"injected failure"}')
            return
        if act == "401":
            self._reply(handler, 401, b"Unauthorized\n")
            return
        if act == "trickle":  # an answer that never ends: a byte at a time until the client hangs up
            try:
                handler.send_response(200)
                handler.send_header("Content-Type", "application/json")
                handler.send_header("Content-Length", str(1 << 20))
                handler.end_headers()
                for _ in range(int(self.slow_s / 0.02)):
                    handler.wfile.write(b" ")
                    handler.wfile.flush()
                    time.sleep(0.02)
            except (BrokenPipeError, ConnectionResetError):
                pass
            return
        if act == "slow":
            time.sleep(self.slow_s)
        req = urllib.request.Request(self.upstream + handler.path, data=body, method=handler.command)
        if body is not None:
            req.add_header("Content-Type", handler.headers.get("Content-Type", "application/x-www-form-urlencoded"))
        try:
            with urllib.request.urlopen(req, timeout=120) as r:
                payload = r.read()
                if act == "warn" and payload.endswith(b"}"):
                    # what Thanos or Mimir add to a partial response
                    payload = payload[:-1] + b',"warnings":["partial response: store 2 of 3 unavailable"]}'
                self._reply(handler, r.status, payload)
        except urllib.error.HTTPError as e:
            self._reply(handler, e.code, e.read())
        except OSError:  # the client gave up or the upstream went away: nothing to answer
            pass

    slow_s = 3.0

    @staticmethod
    def _reply(handler: BaseHTTPRequestHandler, status: int, payload: bytes) -> None:
        try:
            handler.send_response(status)
            handler.send_header("Content-Type", "application/json")
            handler.send_header("Content-Length", str(len(payload)))
            handler.end_headers()
            handler.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError):
            pass


class FaultProxy(_Proxy):
    """Misbehaves according to a plan over request numbers and paths."""

    def __init__(self, upstream: str, plan: Plan, slow_s: float = 3.0):
        super().__init__(upstream)
        self.plan = plan
        self.slow_s = slow_s

    def action(self, n: int, handler: BaseHTTPRequestHandler) -> str:
        return self.plan(n, handler.path)


class AuthProxy(_Proxy):
    """Answers 401 unless the request carries the expected bearer token or basic credentials."""

    def __init__(self, upstream: str, authorization: str):
        super().__init__(upstream)
        self.authorization = authorization
        self.seen_authorization: list[str] = []

    def action(self, n: int, handler: BaseHTTPRequestHandler) -> str:
        got = handler.headers.get("Authorization", "")
        self.seen_authorization.append(got)
        return "ok" if got == self.authorization else "401"


class TlsProxy(_Proxy):
    """Serves HTTPS with the given certificate and forwards everything."""


def self_signed(folder: Path) -> tuple[Path, Path]:
    """A certificate and key for 127.0.0.1, made with the openssl command."""
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj",
                    "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out",
                    str(cert)], check=True, capture_output=True, timeout=60)
    return cert, key
