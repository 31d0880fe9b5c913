"""What keeps the feed's HTTP server up against clients that are slow, many, or gone.

One thread accepts connections and gathers each request's head without blocking (selectors): a client holds
no worker while it sends, however slowly. A head must be whole within `deadline_s` of connecting, or the
client is dropped; at most `pending` heads are gathered at once, `pending_per_address` from one client
address (more are closed at once). The Authorization header is checked as soon as its line arrives, so a wrong
token is answered before the rest of the head. A whole request goes to one of `workers` handler threads, at
most `per_address` of them serving one address at once (the rest wait their turn, never refused), and its
answer then has `send_s` to be taken. A client that goes away mid-answer is one line in the log, not a
traceback.
"""

from __future__ import annotations

import contextlib
import io
import selectors
import socket
import threading
import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

WORKERS = 32
PER_ADDRESS = 16        # workers one client address may hold at once: never all of them
PENDING = 256           # heads gathered at once
PENDING_PER_ADDRESS = 64
DEADLINE_S = 10.0       # connect to the head's blank line
SEND_S = 60.0           # the answer's last byte, once it is rendered
MAX_HEAD_BYTES = 64 << 10
AUTH_LINE = b"authorization:"
GONE = (BrokenPipeError, ConnectionResetError, ConnectionAbortedError, TimeoutError)


@dataclass
class _Pending:
    sock: socket.socket
    address: tuple[Any, ...]
    deadline: float
    head: bytearray = field(default_factory=bytearray)
    scanned: int = 0  # bytes of `head` whose lines were looked at
    whole_at: float = 0.0  # when the head was whole: when the request arrived, however long it waits for a worker

    @property
    def host(self) -> str:
        return str(self.address[0])


class _Writer(io.RawIOBase):
    """A socket's write side that sends everything it is given."""

    def __init__(self, sock: socket.socket):
        self.sock = sock

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        self.sock.sendall(data)
        return len(data)


class GuardedServer:
    """Serves `handler` (a BaseHTTPRequestHandler with do_GET) on `address` under the bounds above."""

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler], *,
                 accept: Callable[[str], bool] | None = None, challenge: str = "Bearer",
                 log: Callable[[str], None] = lambda _m: None, workers: int = WORKERS, per_address: int = PER_ADDRESS,
                 pending: int = PENDING, pending_per_address: int = PENDING_PER_ADDRESS,
                 deadline_s: float = DEADLINE_S, send_s: float = SEND_S, clock: Callable[[], float] = time.monotonic):
        self.handler, self.accept, self.challenge, self.log = handler, accept, challenge, log
        self.workers, self.per_address = workers, per_address
        self.pending_max, self.pending_per_address = pending, pending_per_address
        self.deadline_s, self.send_s, self.clock = deadline_s, send_s, clock
        self._exchange: Callable[..., object] = _exchange_class(handler, send_s)
        self.socket = socket.create_server(address, backlog=128)
        self.socket.setblocking(False)
        self.server_address = self.socket.getsockname()
        self._selector = selectors.DefaultSelector()
        self._selector.register(self.socket, selectors.EVENT_READ, None)
        self._pending: dict[socket.socket, _Pending] = {}
        self._ready: deque[_Pending] = deque()
        self._busy: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._stopped = threading.Event()

    # -- the gathering thread -----------------------------------------------------------------------------------

    def serve_forever(self, poll_interval: float = 0.1) -> None:
        """Accept, gather heads and hand whole requests to workers until shutdown()."""
        try:
            while not self._stop.is_set():
                for key, _ in self._selector.select(poll_interval):
                    if key.data is None:
                        self._accept()
                    else:
                        self._gather(key.data)
                self._expire()
                self._dispatch()
        finally:
            self._stopped.set()

    def _accept(self) -> None:
        while True:
            try:
                sock, address = self.socket.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return
            host = str(address[0])
            mine = sum(1 for p in self._pending.values() if p.host == host)
            if len(self._pending) >= self.pending_max or mine >= self.pending_per_address:
                sock.close()
                continue
            sock.setblocking(False)
            p = _Pending(sock, address, self.clock() + self.deadline_s)
            self._pending[sock] = p
            self._selector.register(sock, selectors.EVENT_READ, p)

    def _gather(self, p: _Pending) -> None:
        try:
            data = p.sock.recv(8192)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._drop(p)
            return
        if not data:
            self._drop(p)
            return
        p.head += data
        if not self._token_ok(p):
            self._refuse(p, 401, "Unauthorized", b"401 unauthorized: send 'Authorization: Bearer <token>'\n",
                         {"WWW-Authenticate": self.challenge})
            return
        end = _head_end(p.head)
        if end < 0:
            if len(p.head) > MAX_HEAD_BYTES:
                self._refuse(p, 431, "Request Header Fields Too Large", b"431 request head too large\n")
            return
        self._selector.unregister(p.sock)
        del self._pending[p.sock]
        p.whole_at = self.clock()
        self._ready.append(p)

    def _token_ok(self, p: _Pending) -> bool:
        """False once an Authorization line has arrived with a wrong credential."""
        if self.accept is None:
            return True
        while True:
            nl = p.head.find(b"\n", p.scanned)
            if nl < 0:
                return True
            line = bytes(p.head[p.scanned:nl])
            p.scanned = nl + 1
            if line[:len(AUTH_LINE)].lower() == AUTH_LINE:
                return self.accept(line[len(AUTH_LINE):].decode("latin-1").strip())

    def _expire(self) -> None:
        now = self.clock()
        for p in [p for p in self._pending.values() if now >= p.deadline]:
            self._drop(p)  # a head not whole in time: closed without an answer, as a server that gave up
        while self._ready and now >= self._ready[0].deadline + self.deadline_s:
            p = self._ready.popleft()  # a whole request that waited as long again for a worker
            self._reply(p, 503, "Service Unavailable", b"503 busy: try again\n")

    def _dispatch(self) -> None:
        waiting: deque[_Pending] = deque()
        while self._ready:
            p = self._ready.popleft()
            with self._lock:
                free = sum(self._busy.values()) < self.workers and self._busy[p.host] < self.per_address
                if free:
                    self._busy[p.host] += 1
            if free:
                threading.Thread(target=self._work, args=(p,), name="feed-client", daemon=True).start()
            else:
                waiting.append(p)
        self._ready = waiting

    def _drop(self, p: _Pending) -> None:
        with contextlib.suppress(KeyError, ValueError):
            self._selector.unregister(p.sock)
        self._pending.pop(p.sock, None)
        p.sock.close()

    def _refuse(self, p: _Pending, code: int, reason: str, body: bytes, headers: dict[str, str] | None = None) -> None:
        with contextlib.suppress(KeyError, ValueError):
            self._selector.unregister(p.sock)
        self._pending.pop(p.sock, None)
        self._reply(p, code, reason, body, headers)

    def _reply(self, p: _Pending, code: int, reason: str, body: bytes, headers: dict[str, str] | None = None) -> None:
        """A short answer from this thread (it fits the socket's buffer), then the close."""
        lines = [f"HTTP/1.0 {code} {reason}", "Content-Type: text/plain", f"Content-Length: {len(body)}",
                 "Connection: close", *(f"{k}: {v}" for k, v in (headers or {}).items())]
        with contextlib.suppress(OSError):
            p.sock.settimeout(1.0)
            p.sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)
        p.sock.close()

    # -- the workers --------------------------------------------------------------------------------------------

    def _work(self, p: _Pending) -> None:
        sock = p.sock
        try:
            sock.setblocking(True)
            sock.settimeout(self.send_s)
            self._exchange((sock, bytes(p.head), p.whole_at), p.address, self)
        except GONE:
            self.log(f"client {p.host} went away before the answer's end")
        except Exception as exc:  # one client's failure is one line; the server goes on
            self.log(f"client {p.host}: {type(exc).__name__}")
        finally:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
            with self._lock:
                self._busy[p.host] -= 1
                if self._busy[p.host] <= 0:
                    del self._busy[p.host]

    def shutdown(self) -> None:
        """Stop serve_forever and wait for it."""
        self._stop.set()
        self._stopped.wait(5)

    def server_close(self) -> None:
        """Close the listening socket and every head still being gathered."""
        for p in list(self._pending.values()) + list(self._ready):
            self._drop(p)
        self._ready.clear()
        self._selector.close()
        self.socket.close()


def _head_end(head: bytearray) -> int:
    """Where the head's blank line ends, or -1."""
    for mark in (b"\r\n\r\n", b"\n\n"):
        at = head.find(mark)
        if at >= 0:
            return at + len(mark)
    return -1


def _exchange_class(handler: type[BaseHTTPRequestHandler], send_s: float) -> type[BaseHTTPRequestHandler]:
    """`handler` run over a head already read: its request is (socket, head, arrived), its rfile the head, its
    wfile the socket, `arrived` when the request was whole, and `start_sending()` gives the answer `send_s` to
    reach the client, whatever its pace."""

    class Exchange(handler):  # type: ignore[valid-type,misc]
        def setup(self) -> None:
            sock, head, self.arrived = self.request
            self.connection = sock
            self.rfile = io.BytesIO(head)
            self.wfile = _Writer(sock)
            self._watchdog: threading.Timer | None = None

        def start_sending(self) -> None:
            self._watchdog = threading.Timer(send_s, _shut, args=(self.connection,))
            self._watchdog.daemon = True
            self._watchdog.start()

        def finish(self) -> None:
            if self._watchdog is not None:
                self._watchdog.cancel()

    return Exchange


def _shut(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
