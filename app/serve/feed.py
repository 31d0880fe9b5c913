"""The scrape endpoint: the newest canonical values as Prometheus/OpenMetrics text, optionally behind a token.

It serves gauges and counters under their feed names, histograms as their `_bucket`, `_sum` and `_count`
parts, error events as the counter `accelerator_errors_total` (the events of one device, class, severity and
code so far) and the versions seen in the window as `hetpool_software_version_info` (value 1). With
`?timestamps=1` each sample carries the time it was taken (error totals and versions: the newest sample's),
as Prometheus' /federate does, so a hetpool scraping the feed directly stores each sample once and sees a
region that stopped reporting stop; a Prometheus scrapes it without, as any exporter.

A scrape reads the shared store once (a short read under its shared lock) and renders what it finds, so the
endpoint holds nothing open between scrapes and never keeps a writer out for longer than one read. What one
bad source can do to it is bounded: the rendered body is a snapshot that scrapes within `refresh_s` of it
share (concurrent scrapes wait for one read, not one each); at most `max_series` series are served, and
`hetpool_feed_series_dropped` says how many more there were; and app/serve/guard.py bounds the clients: a
request is gathered without holding a worker and must be whole within `timeout_s` of connecting, a wrong token
is answered when its header line arrives, and the workers and the heads being gathered are bounded in all and
per client address.
"""

from __future__ import annotations

import hmac
import math
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, urlsplit

from prometheus_client.core import (
    CollectorRegistry,
    CounterMetricFamily,
    GaugeMetricFamily,
    InfoMetricFamily,
    Metric,
)
from prometheus_client.exposition import choose_encoder

from app.serve.guard import GONE, PER_ADDRESS, WORKERS, GuardedServer
from canonical.feednames import (
    ERRORS_FAMILY,
    ERRORS_SAMPLE,
    VERSION_FAMILY,
    VERSION_LABELS,
    VERSION_SAMPLE,
    family_name,
    feed_labels,
    sample_name,
)
from canonical.metrics import ERRORS_METRIC, METRICS
from canonical.redact import redact
from store import Access
from store.feed import FeedRead, Latest, feed_read

ENV_TOKEN = "HETPOOL_FEED_TOKEN"
DEFAULT_WINDOW_MS = 5 * 60_000
DEFAULT_MAX_SERIES = 100_000
DEFAULT_REFRESH_S = 1.0
TIMEOUT_S = 10.0  # a client's whole request, from connecting (app/serve/guard.py)
CHALLENGE = 'Bearer realm="hetpool feed"'

# a read gives the series to serve (at most a limit) and how many there were
Reader = Callable[[int | None], FeedRead]
STAT = "stat"  # the attribute naming a histogram row's part: bucket, sum or count


def store_reader(store: Access, window_ms: int = DEFAULT_WINDOW_MS) -> Reader:
    """A reader that opens the store for one read per snapshot."""
    def read(limit: int | None) -> FeedRead:
        with store.read() as con:
            return feed_read(con, window_ms, limit)
    return read


class FeedCollector:
    """A prometheus_client collector yielding one family per canonical metric present in a read, the versions,
    and the feed's own two gauges: series served and series dropped over the cap."""

    def __init__(self, read: FeedRead, timestamps: bool = False):
        self.read, self.timestamps = read, timestamps

    def _at(self, ts: int) -> float | None:
        return ts / 1000.0 if self.timestamps else None

    def describe(self) -> list[Metric]:
        """Nothing up front: the families depend on what the store holds at scrape time."""
        return []

    def collect(self) -> Iterator[Metric]:
        """Gauge, counter, histogram and info families built from one store read."""
        families: dict[str, Metric] = {}
        for row in self.read.rows:
            named = _sample(row)
            if named is None:
                continue
            name, attributes = named
            family = families.get(row.metric)
            if family is None:
                family = families[row.metric] = _family(row.metric)
            labels = feed_labels(row.pool, row.node, row.device, row.vendor, attributes, row.device_wide)
            # a running error total is as of the newest sample of all, not of its last event: a reader must
            # see it move forward, and a Prometheus refuses a sample hours older than its newest
            at = self.read.as_of if row.metric == ERRORS_METRIC else row.ts
            family.add_sample(name, labels, row.value, self._at(at))
        for family in families.values():
            if family.type == "histogram":
                family.samples.sort(key=_histogram_order)
        yield from families.values()
        if self.read.versions:
            info = InfoMetricFamily(VERSION_FAMILY, "software and firmware versions seen in the feed's window")
            for v in self.read.versions:
                labels = feed_labels(v.pool, v.node, v.device, v.vendor,
                                     dict(zip(VERSION_LABELS, (v.component, v.version), strict=True)))
                info.add_sample(VERSION_SAMPLE, labels, 1.0, self._at(self.read.as_of))
            yield info
        served = self.read.served
        yield GaugeMetricFamily("hetpool_feed_series", "series this scrape serves", value=served)
        yield GaugeMetricFamily("hetpool_feed_series_dropped", "fresh series left out over the feed's series cap",
                                value=max(0, self.read.total - served))


def _family(metric: str) -> Metric:
    """The empty family of a canonical metric, of its Prometheus type."""
    canon = METRICS[metric]
    if metric == ERRORS_METRIC:
        return CounterMetricFamily(ERRORS_FAMILY, "hetpool error events of one device, class, severity and code "
                                                  "so far")
    doc = f"hetpool canonical {canon.name} ({canon.unit})"
    if canon.kind == "histogram":
        return Metric(family_name(metric), doc, "histogram")
    kind = CounterMetricFamily if canon.kind == "counter" else GaugeMetricFamily
    return kind(family_name(metric), doc)


def _histogram_order(sample: Any) -> tuple[list[tuple[str, str]], bool, float]:
    """OpenMetrics order: the parts of one series together, buckets first and in increasing `le`."""
    labels = sorted((k, v) for k, v in sample.labels.items() if k != "le")
    bucket = sample.name.endswith("_bucket")
    try:
        bound = float(sample.labels.get("le", "nan"))
    except ValueError:
        bound = math.nan
    return labels, not bucket, bound


def _sample(row: Latest) -> tuple[str, dict[str, str]] | None:
    """A row's sample name and the attributes its labels carry; None for a histogram row without its part."""
    if row.metric == ERRORS_METRIC:
        return ERRORS_SAMPLE, row.attributes
    if METRICS[row.metric].kind != "histogram":
        return sample_name(row.metric), row.attributes
    stat = row.attributes.get(STAT)
    if stat not in ("bucket", "sum", "count"):
        return None
    return f"{family_name(row.metric)}_{stat}", {k: v for k, v in row.attributes.items() if k != STAT}


class Snapshot:
    """The rendered feed, shared by the scrapes within `refresh_s` of one read (one per content type)."""

    def __init__(self, read: Reader, max_series: int = DEFAULT_MAX_SERIES, refresh_s: float = DEFAULT_REFRESH_S,
                 clock: Callable[[], float] = time.monotonic):
        self.read, self.max_series, self.refresh_s, self.clock = read, max_series, refresh_s, clock
        self._lock = threading.Lock()
        self._at = -math.inf
        self._read: FeedRead | None = None
        self._bodies: dict[tuple[str, bool], bytes] = {}
        self.reads = 0

    def body(self, accept: str, timestamps: bool = False, arrived: float | None = None) -> tuple[bytes, str]:
        """The exposition for an Accept header, from the current snapshot (a new one when it is too old as of
        `arrived`, when the request came, default now), with each sample's time when `timestamps`."""
        encoder, content_type = choose_encoder(accept)
        arrived = self.clock() if arrived is None else arrived
        with self._lock:  # one scrape reads and renders; the others wait for it and share what it made
            # fresh is judged when the scrape arrived: a read that ended after that (one in flight meanwhile) is
            # shared whatever its age now, so a crowd waiting on a slow read and render never reads in turn
            if self._read is None or arrived - self._at >= self.refresh_s:
                self._read = self.read(self.max_series)
                self.reads += 1
                self._bodies = {}
                self._at = self.clock()  # fresh from when it is read, however long the read took
            key = (content_type, timestamps)
            body = self._bodies.get(key)
            if body is None:
                registry = CollectorRegistry(auto_describe=False)
                registry.register(FeedCollector(self._read, timestamps))
                body = self._bodies[key] = encoder(registry)
            return body, content_type


def _timestamps(path: str) -> bool:
    """True for `?timestamps=1` (or true/yes): what a hetpool reading this feed directly asks for."""
    values = parse_qs(urlsplit(path).query).get("timestamps", [""])
    return values[-1].lower() in ("1", "true", "yes")


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
                 log: Callable[[str], None] | None = None, *, max_series: int = DEFAULT_MAX_SERIES,
                 refresh_s: float = DEFAULT_REFRESH_S, timeout_s: float = TIMEOUT_S,
                 max_connections: int = WORKERS, per_address: int = PER_ADDRESS):
        self.snapshot = Snapshot(read, max_series, refresh_s)
        say = log or (lambda _m: None)
        token = token or None
        self.httpd = GuardedServer((host, port), _handler(self.snapshot, token, say),
                                   accept=(lambda header: authorized(header, token)) if token else None,
                                   challenge=CHALLENGE, log=say, workers=max_connections, per_address=per_address,
                                   deadline_s=timeout_s)
        self.url = f"http://{host}:{self.httpd.server_address[1]}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, args=(0.1,), name="feed", daemon=True)

    def start(self) -> FeedServer:
        """Serve until stopped."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket."""
        self.httpd.shutdown()
        self.httpd.server_close()


def _handler(snapshot: Snapshot, token: str | None, log: Callable[[str], None]) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if not authorized(self.headers.get("Authorization"), token):
                self._send(401, b"401 unauthorized: send 'Authorization: Bearer <token>'\n", "text/plain",
                           {"WWW-Authenticate": CHALLENGE})
                return
            if self.path.split("?")[0] not in ("/", "/metrics"):
                self._send(404, b"404 not found; try /metrics\n", "text/plain")
                return
            try:
                body, content_type = snapshot.body(self.headers.get("Accept", ""), _timestamps(self.path),
                                                   getattr(self, "arrived", None))
            except Exception as exc:  # a store that is busy or missing: say so, keep serving
                message = redact(f"{type(exc).__name__}: {exc}")
                log(f"scrape failed: {message}")
                self._send(503, f"503 store not readable: {message}\n".encode(), "text/plain")
                return
            self._send(200, body, content_type)

        def _send(self, code: int, body: bytes, content_type: str, headers: dict[str, str] | None = None) -> None:
            start_sending = getattr(self, "start_sending", None)
            if start_sending is not None:
                start_sending()
            self.send_response(code)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.end_headers()
            try:
                self.wfile.write(body)
            except GONE:
                self.close_connection = True
                log(f"client {self.client_address[0]} went away before the answer's end")

        def log_message(self, format: str, *args: Any) -> None:
            return  # no access log: request lines and headers stay out of the logs, credentials included

    return Handler
