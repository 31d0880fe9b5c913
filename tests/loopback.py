"""Hostile HTTP servers on loopback for the outbound client's tests: one that answers each path as told (a
redirect, a status, a body) and records every request's method and headers, one that trickles its answer a
byte at a time, one whose body never ends, and a forward proxy that records what it was asked."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Seen:
    """One request as the server got it."""

    method: str
    path: str
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""


class Recording:
    """Answers `routes[path] = (status, headers, body)`, 404 otherwise; every request kept in `seen`."""

    def __init__(self, host: str = "127.0.0.1"):
        self.routes: dict[str, tuple[int, dict[str, str], bytes]] = {}
        self.seen: list[Seen] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                server.seen.append(Seen(self.command, self.path, dict(self.headers), body))
                status, headers, out = server.routes.get(self.path.split("?")[0], (404, {}, b"not here\n"))
                self.send_response(status)
                for key, value in headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            do_GET = do_POST = do_PUT = do_HEAD = _answer

            def log_message(self, format: str, *args: Any) -> None:
                return

        self.httpd = ThreadingHTTPServer((host, 0), Handler)
        self.origin = f"http://{host}:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True).start()

    def redirect(self, path: str, to: str, status: int = 302) -> None:
        """Answer `path` with a redirect to `to`."""
        self.routes[path] = (status, {"Location": to}, b"")

    def close(self) -> None:
        """Stop serving."""
        self.httpd.shutdown()
        self.httpd.server_close()


class Trickler:
    """A raw socket server: each connection gets `head` at once, then one byte of `tail` every `every_s`, for
    at most `for_s` seconds (so nothing it starts outlives a test)."""

    def __init__(self, head: bytes, tail: bytes, every_s: float, for_s: float = 30.0, host: str = "127.0.0.1"):
        self.head, self.tail, self.every_s, self.for_s = head, tail, every_s, for_s
        self.sock = socket.create_server((host, 0))
        self.url = f"http://{host}:{self.sock.getsockname()[1]}/metrics"
        self.closed = threading.Event()
        self.accepted = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.closed.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        end = time.monotonic() + self.for_s
        try:
            conn.recv(65536)
            conn.sendall(self.head)
            for i in range(len(self.tail)):
                if self.closed.wait(self.every_s) or time.monotonic() > end:
                    return
                conn.sendall(self.tail[i:i + 1])
        except OSError:
            return
        finally:
            conn.close()

    def close(self) -> None:
        """Stop accepting and end every trickle."""
        self.closed.set()
        self.sock.close()


class Endless:
    """A raw socket server whose body never ends (no Content-Length, sent as fast as the client reads), up to
    `limit` bytes so a broken client cannot run away with the test."""

    def __init__(self, limit: int = 2 << 30, host: str = "127.0.0.1"):
        self.limit = limit
        self.sent = 0
        self.sock = socket.create_server((host, 0))
        self.url = f"http://{host}:{self.sock.getsockname()[1]}/metrics"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        line = b"junk_metric_that_no_profile_knows 1\n" * 2000
        try:
            conn.recv(65536)
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\n")
            while self.sent < self.limit:
                conn.sendall(line)
                self.sent += len(line)
        except OSError:
            return
        finally:
            conn.close()

    def close(self) -> None:
        """Stop accepting."""
        self.sock.close()


class ForwardProxy:
    """A forward HTTP proxy: absolute-form requests forwarded, CONNECT tunnelled; each request kept in `seen`
    (its method, target and headers), and 407 answered unless it carries `wants` as Proxy-Authorization."""

    def __init__(self, wants: str = "", host: str = "127.0.0.1"):
        self.seen: list[Seen] = []
        self.wants = wants
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def _allowed(self) -> bool:
                proxy.seen.append(Seen(self.command, self.path, dict(self.headers)))
                if proxy.wants and self.headers.get("Proxy-Authorization") != proxy.wants:
                    self.send_response(407)
                    self.send_header("Proxy-Authenticate", 'Basic realm="test"')
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return False
                return True

            def do_GET(self) -> None:
                if not self._allowed():
                    return
                req = urllib.request.Request(self.path, headers={k: v for k, v in self.headers.items()
                                                                 if k.lower() not in ("proxy-authorization",
                                                                                      "connection")})
                opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
                try:
                    with opener.open(req, timeout=10) as r:
                        status, headers, out = r.status, dict(r.headers), r.read()
                except urllib.error.HTTPError as e:
                    status, headers, out = e.code, dict(e.headers), e.read()
                self.send_response(status)
                for key, value in headers.items():
                    if key.lower() not in ("content-length", "transfer-encoding", "connection"):
                        self.send_header(key, value)
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def do_CONNECT(self) -> None:
                if not self._allowed():
                    return
                host, _, port = self.path.rpartition(":")
                upstream = socket.create_connection((host, int(port)), timeout=10)
                self.send_response(200, "Connection established")
                self.end_headers()
                pipes = [threading.Thread(target=_pipe, args=(a, b), daemon=True)
                         for a, b in ((self.connection, upstream), (upstream, self.connection))]
                for t in pipes:
                    t.start()
                for t in pipes:
                    t.join(15)
                upstream.close()
                self.close_connection = True

            def log_message(self, format: str, *args: Any) -> None:
                return

        self.httpd = ThreadingHTTPServer((host, 0), Handler)
        self.httpd.daemon_threads = True
        self.origin = f"http://{host}:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True).start()

    def close(self) -> None:
        """Stop serving."""
        self.httpd.shutdown()
        self.httpd.server_close()


def _pipe(src: socket.socket, dst: socket.socket) -> None:
    try:
        while data := src.recv(1 << 16):
            dst.sendall(data)
    except OSError:
        pass
    with contextlib.suppress(OSError):
        dst.shutdown(socket.SHUT_WR)
