"""The scrape endpoint: the newest canonical values as Prometheus/OpenMetrics text, optionally behind a token.

Every scrape reads the shared store once (a short read under its shared lock) and renders what it finds, so
the endpoint holds nothing open between scrapes and never keeps a writer out for longer than one read.
"""

from __future__ import annotations

import hmac
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client.core import CollectorRegistry, CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import choose_encoder

from canonical.feednames import FEED_KINDS, family_name, feed_labels, sample_name
from canonical.metrics import METRICS
from canonical.redact import redact
from store import Access
from store.feed import Latest, latest_values

ENV_TOKEN = "HETPOOL_FEED_TOKEN"
DEFAULT_WINDOW_MS = 5 * 60_000

Reader = Callable[[], list[Latest]]


def store_reader(store: Access, window_ms: int = DEFAULT_WINDOW_MS) -> Reader:
    """A reader that opens the store for one read per scrape."""
    def read() -> list[Latest]:
        with store.read() as con:
            return latest_values(con, window_ms, FEED_KINDS)
    return read


class FeedCollector:
    """A prometheus_client collector yielding one family per canonical metric present in the store."""

    def __init__(self, read: Reader):
        self.read = read

    def describe(self) -> list[Metric]:
        """Nothing up front: the families depend on what the store holds at scrape time."""
        return []

    def collect(self) -> Iterator[Metric]:
        """Gauge and counter families built from one store read."""
        families: dict[str, Metric] = {}
        for row in self.read():
            canon = METRICS[row.metric]
            family = families.get(row.metric)
            if family is None:
                doc = f"hetpool canonical {canon.name} ({canon.unit})"
                kind = CounterMetricFamily if canon.kind == "counter" else GaugeMetricFamily
                family = families[row.metric] = kind(family_name(row.metric), doc)
            labels = feed_labels(row.pool, row.node, row.device, row.vendor, row.attributes)
            family.add_sample(sample_name(row.metric), labels, row.value)
        yield from families.values()


def authorized(header: str | None, token: str | None) -> bool:
    """True without a token configured, else only for `Bearer <token>`, compared in constant time."""
    if not token:
        return True
    scheme, _, given = (header or "").partition(" ")
    # compare even when the scheme is wrong, so the time taken says nothing about the header
    same = hmac.compare_digest(given.strip().encode(), token.encode())
    return scheme.lower() == "bearer" and same


class FeedServer:
    """The endpoint on its own thread: GET /metrics (or /) answers the exposition, anything else 404."""

    def __init__(self, host: str, port: int, read: Reader, token: str | None = None,
                 log: Callable[[str], None] | None = None):
        registry = CollectorRegistry(auto_describe=False)
        registry.register(FeedCollector(read))
        self.httpd = ThreadingHTTPServer((host, port), _handler(registry, token or None, log or (lambda _m: None)))
        self.httpd.daemon_threads = True
        self.url = f"http://{host}:{self.httpd.server_address[1]}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="feed", daemon=True)

    def start(self) -> FeedServer:
        """Serve until stopped."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket."""
        self.httpd.shutdown()
        self.httpd.server_close()


def _handler(registry: CollectorRegistry, token: str | None,
             log: Callable[[str], None]) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if not authorized(self.headers.get("Authorization"), token):
                self._send(401, b"401 unauthorized: send 'Authorization: Bearer <token>'\n", "text/plain",
                           {"WWW-Authenticate": 'Bearer realm="hetpool feed"'})
                return
            if self.path.split("?")[0] not in ("/", "/metrics"):
                self._send(404, b"404 not found; try /metrics\n", "text/plain")
                return
            encoder, content_type = choose_encoder(self.headers.get("Accept", ""))
            try:
                body = encoder(registry)
            except Exception as exc:  # a store that is busy or missing: say so, keep serving
                message = redact(f"{type(exc).__name__}: {exc}")
                log(f"scrape failed: {message}")
                self._send(503, f"503 store not readable: {message}\n".encode(), "text/plain")
                return
            self._send(200, body, content_type)

        def _send(self, code: int, body: bytes, content_type: str, headers: dict[str, str] | None = None) -> None:
            self.send_response(code)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            return  # no access log: request lines and headers stay out of the logs, credentials included

    return Handler
