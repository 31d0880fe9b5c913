"""The feed's guard (app/serve/guard.py) and its shared read against clients that trickle, crowd, lie or leave:
on loopback, with the feed in process over a real store, and as a `hetpool serve-feed` process."""

from __future__ import annotations

import socket
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.serve.feed import FeedServer, store_reader
from app.serve.guard import PENDING_PER_ADDRESS
from store import Store, connect
from store.feed import FeedRead, Latest
from tests.test_feed import ROWS, Feed

TOKEN = "s3cret-feed-token-0123456789"


def trickle(port: int, source: str, n: int, lines: int = 1000) -> list[socket.socket]:
    """`n` clients from `source` that send a request line and then nothing whole."""
    socks = []
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port), timeout=10, source_address=(source, 0))
        s.sendall(b"GET /metrics HTTP/1.1\r\n")
        socks.append(s)
    return socks


def feed_lines(socks: list[socket.socket], stop: threading.Event, every_s: float) -> None:
    """Send each socket one header line every `every_s` until stopped or closed."""
    while not stop.wait(every_s):
        for s in socks:
            try:
                s.sendall(b"X-Slow: a\r\n")
            except OSError:
                continue


def closed_by_server(s: socket.socket) -> bool:
    """True when the server has closed the socket (EOF, or a reset)."""
    try:
        while True:
            data = s.recv(4096)
            if not data:
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except TimeoutError:
        return False


@pytest.fixture
def server() -> Iterator[FeedServer]:
    srv = FeedServer("127.0.0.1", 0, lambda _limit: FeedRead([], [], 0), timeout_s=1.0).start()
    yield srv
    srv.stop()


def test_trickling_clients_hold_no_worker_and_are_dropped_at_the_deadline(server: FeedServer) -> None:
    port = int(server.httpd.server_address[1])
    socks = trickle(port, "127.0.0.2", PENDING_PER_ADDRESS + 4)
    stop = threading.Event()
    threading.Thread(target=feed_lines, args=(socks, stop, 0.2), daemon=True).start()
    try:
        # while they trickle, a scrape from the same loopback range is answered at once
        with urllib.request.urlopen(f"{server.url}/metrics", timeout=5) as r:
            assert r.status == 200
        for s in socks:
            s.settimeout(8)
        began = time.monotonic()
        # the four over the per-address bound are closed at once, the others at the 1 s deadline, though each
        # sends a header line every 0.2 s (each read on its own is quick)
        assert all(closed_by_server(s) for s in socks)
        assert time.monotonic() - began < 6
    finally:
        stop.set()
        for s in socks:
            s.close()


def test_the_token_is_checked_when_its_header_line_arrives() -> None:
    srv = FeedServer("127.0.0.1", 0, lambda _limit: FeedRead([], [], 0), token=TOKEN, timeout_s=30.0).start()
    try:
        s = socket.create_connection(("127.0.0.1", int(srv.httpd.server_address[1])), timeout=5)
        # the request is not finished (no blank line): a wrong token is answered at once, not after 30 s
        s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer not-the-token\r\n")
        answer = s.recv(4096)
        assert answer.startswith(b"HTTP/1.0 401 "), answer
        s.close()
        req = urllib.request.Request(f"{srv.url}/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
        with urllib.request.urlopen(req, timeout=5) as r:
            assert r.status == 200
    finally:
        srv.stop()


def test_a_client_that_leaves_mid_answer_is_one_line(capfd: pytest.CaptureFixture[str]) -> None:
    # 5,000 series with a long label: a body of several MB, more than the socket buffers take at once
    rows = [Latest("p", f"n{i}", "0", "nvidia", "accelerator.power", {"model": "m" * 1000}, 1_796_000_000_000,
                   float(i)) for i in range(5_000)]
    lines: list[str] = []
    srv = FeedServer("127.0.0.1", 0, lambda _limit: FeedRead(rows, [], len(rows)), log=lines.append).start()
    try:
        for _ in range(3):
            s = socket.socket()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connecting: a small window
            s.settimeout(5)
            s.connect(("127.0.0.1", int(srv.httpd.server_address[1])))
            s.sendall(b"GET /metrics HTTP/1.0\r\n\r\n")
            s.recv(100)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\1\0\0\0\0\0\0\0")  # reset, not a clean close
            s.close()
        deadline = time.monotonic() + 10
        while len(lines) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        srv.stop()
    assert lines == ["client 127.0.0.1 went away before the answer's end"] * 3
    assert "Traceback" not in capfd.readouterr().err


def test_a_crowd_of_scrapes_shares_the_read_in_flight(fleet_db: Path) -> None:
    # 20,000 series: reading and rendering them takes longer than --refresh's 0.05 s here, so scrapes that
    # queued behind the read would each read again in turn if freshness were judged when their turn came
    con = connect(fleet_db)
    con.execute("INSERT INTO samples (ts, pool, node, device, metric, value, attributes) "
                "SELECT 1796000000000, 'h100-a', 'n' || i, '0', 'accelerator.power', i, '{}' FROM range(20000) t(i)")
    con.close()
    reads: list[float] = []
    inner = store_reader(Store(fleet_db))

    def counted(limit: int | None) -> FeedRead:
        reads.append(time.monotonic())
        return inner(limit)
    srv = FeedServer("127.0.0.1", 0, counted, refresh_s=0.05).start()
    bodies: list[bytes] = []

    def one() -> None:
        with urllib.request.urlopen(f"{srv.url}/metrics", timeout=60) as r:
            bodies.append(r.read())
    try:
        crowd = [threading.Thread(target=one) for _ in range(30)]
        for t in crowd:
            t.start()
        for t in crowd:
            t.join(90)
    finally:
        srv.stop()
    assert len(bodies) == 30 and len(set(bodies)) == 1
    assert len(reads) == 1  # one read for the crowd, not one each
    assert b'accelerator_power_watts{device="0",node="n19999",pool="h100-a"' in bodies[0]


def test_serve_feed_answers_a_real_scrape_while_32_sockets_trickle(fleet_db: Path) -> None:
    con = connect(fleet_db)
    con.executemany("INSERT INTO samples (ts, pool, node, device, metric, value, attributes) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?)", ROWS)
    con.close()
    feed = Feed(fleet_db)
    port = int(feed.host_port.rsplit(":", 1)[1])
    socks = trickle(port, "127.0.0.2", 32)
    stop = threading.Event()
    threading.Thread(target=feed_lines, args=(socks, stop, 3.0), daemon=True).start()
    try:
        began = time.monotonic()
        status, body = feed.get()
        assert status == 200 and "accelerator_utilization_ratio" in body
        assert time.monotonic() - began < 5
    finally:
        stop.set()
        for s in socks:
            s.close()
        code, err = feed.stop()
    assert code == 0 and "Traceback" not in err, err
