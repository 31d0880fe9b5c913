"""Scraping a live /metrics endpoint: one GET through the outbound client, the body handed on in chunks.

The whole scrape has one deadline (connect to last byte), its body a cap, and a redirect is followed only to
the same origin (`collectors.outbound`), so $HETPOOL_SCRAPE_TOKEN never reaches another host.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from urllib.parse import urlparse

from collectors.exceptions import CollectorError
from collectors.outbound import MAX_BODY_BYTES, Connector, Limits, OutboundError, request
from collectors.outbound import connect as default_connect

# Plain text exposition first: hetpool does not read the protobuf format.
ACCEPT = "text/plain;version=0.0.4;q=0.9,application/openmetrics-text;version=1.0.0;q=0.8,*/*;q=0.1"
CHUNK_BYTES = 4 << 20
DEADLINE_S = 10.0  # a whole scrape, as Prometheus' default scrape_timeout
# a bearer token for endpoints behind one, such as another hetpool's feed (HETPOOL_FEED_TOKEN there)
ENV_TOKEN = "HETPOOL_SCRAPE_TOKEN"


def check_url(url: str) -> str:
    """The URL, or a CollectorError when it is not http(s)://host[:port]/path."""
    parsed = urlparse(url)
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise CollectorError(f"bad scrape URL {url!r}; expected http(s)://host:port/metrics")
    return url


def url_host(url: str) -> str:
    """The host part of a URL, used as the node of samples that carry no node label."""
    return urlparse(url).hostname or url


def scrape(url: str, *, timeout: float = DEADLINE_S, max_bytes: int = MAX_BODY_BYTES, chunk_bytes: int = CHUNK_BYTES,
           env: Mapping[str, str] = os.environ, connect: Connector = default_connect,
           abort: Callable[[], bool] | None = None) -> Iterator[bytes]:
    """GET the endpoint (with $HETPOOL_SCRAPE_TOKEN as a bearer token when set) and yield its (decompressed)
    body in chunks; the whole scrape within `timeout` seconds and at most `max_bytes` of body, ended at once
    when `abort()` turns true."""
    sent = {"Accept": ACCEPT, "Accept-Encoding": "gzip", "User-Agent": "hetpool"}
    token = env.get(ENV_TOKEN, "").strip()
    if token:
        sent["Authorization"] = f"Bearer {token}"
    try:
        response = request("GET", check_url(url), headers=sent, limits=Limits(timeout, max_bytes), connect=connect,
                           abort=abort, env=env)
    except OutboundError as exc:
        raise CollectorError(f"cannot scrape {url}: {exc.why}") from None
    with response:
        if response.status >= 300:
            hint = ""
            if response.status in (401, 403):
                hint = f"; check {ENV_TOKEN}" if token else f"; set {ENV_TOKEN} to the endpoint's bearer token"
            raise CollectorError(f"scrape of {url} failed: HTTP {response.status} {response.reason}{hint}")
        content_type = response.header("Content-Type")
        if "protobuf" in content_type:
            raise CollectorError(f"{url} answered with {content_type}; hetpool reads the text formats only")
        pending = bytearray()
        try:
            for piece in response.chunks():
                pending += piece
                if len(pending) >= chunk_bytes:
                    yield bytes(pending[:chunk_bytes])
                    del pending[:chunk_bytes]
        except OutboundError as exc:
            raise CollectorError(f"scrape of {url} broke off: {exc.why}") from None
        if pending:
            yield bytes(pending)
