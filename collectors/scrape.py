"""Scraping a live /metrics endpoint: one HTTP GET, the body streamed in chunks to the parser."""

from __future__ import annotations

import gzip
import io
import os
import urllib.error
import urllib.request
import zlib
from collections.abc import Callable, Iterator, Mapping
from typing import BinaryIO, cast
from urllib.parse import urlparse

from collectors.exceptions import CollectorError

# Plain text exposition first: hetpool does not read the protobuf format.
ACCEPT = "text/plain;version=0.0.4;q=0.9,application/openmetrics-text;version=1.0.0;q=0.8,*/*;q=0.1"
CHUNK_BYTES = 4 << 20
# a bearer token for endpoints behind one, such as another hetpool's feed (HETPOOL_FEED_TOKEN there)
ENV_TOKEN = "HETPOOL_SCRAPE_TOKEN"

Opener = Callable[[urllib.request.Request, float], BinaryIO]


def _default_opener(request: urllib.request.Request, timeout: float) -> BinaryIO:
    return cast(BinaryIO, urllib.request.urlopen(request, timeout=timeout))


def check_url(url: str) -> str:
    """The URL, or a CollectorError when it is not http(s)://host[:port]/path."""
    parsed = urlparse(url)
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise CollectorError(f"bad scrape URL {url!r}; expected http(s)://host:port/metrics")
    return url


def url_host(url: str) -> str:
    """The host part of a URL, used as the node of samples that carry no node label."""
    return urlparse(url).hostname or url


def scrape(url: str, *, timeout: float = 10.0, opener: Opener = _default_opener,
           chunk_bytes: int = CHUNK_BYTES, env: Mapping[str, str] = os.environ) -> Iterator[bytes]:
    """GET the endpoint (with $HETPOOL_SCRAPE_TOKEN as a bearer token when set) and yield its (decompressed)
    body in chunks."""
    sent = {"Accept": ACCEPT, "Accept-Encoding": "gzip", "User-Agent": "hetpool"}
    token = env.get(ENV_TOKEN, "").strip()
    if token:
        sent["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(check_url(url), headers=sent)
    try:
        response = opener(request, timeout)
    except urllib.error.HTTPError as exc:
        hint = ""
        if exc.code in (401, 403):
            hint = f"; check {ENV_TOKEN}" if token else f"; set {ENV_TOKEN} to the endpoint's bearer token"
        raise CollectorError(f"scrape of {url} failed: HTTP {exc.code} {exc.reason}{hint}") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise CollectorError(f"cannot scrape {url}: {reason}") from None
    with response:
        headers = getattr(response, "headers", None)
        content_type = headers.get("Content-Type", "") if headers is not None else ""
        if "protobuf" in content_type:
            raise CollectorError(f"{url} answered with {content_type}; hetpool reads the text formats only")
        encoding = headers.get("Content-Encoding", "") if headers is not None else ""
        stream: BinaryIO = gzip.GzipFile(fileobj=response) if encoding == "gzip" else response  # type: ignore[assignment]
        try:
            while True:
                data = stream.read(chunk_bytes)
                if not data:
                    return
                yield data
        except (OSError, EOFError, zlib.error, io.UnsupportedOperation) as exc:
            raise CollectorError(f"scrape of {url} broke off: {exc}") from None
