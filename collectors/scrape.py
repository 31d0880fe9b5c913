"""Scraping a live /metrics endpoint: one HTTP GET, the body streamed in chunks to the parser."""

from __future__ import annotations

import gzip
import io
import urllib.error
import urllib.request
import zlib
from collections.abc import Callable, Iterator
from typing import BinaryIO, cast
from urllib.parse import urlparse

from collectors.errors import CollectorError

# Plain text exposition first: hetpool does not read the protobuf format.
ACCEPT = "text/plain;version=0.0.4;q=0.9,application/openmetrics-text;version=1.0.0;q=0.8,*/*;q=0.1"
CHUNK_BYTES = 4 << 20

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
           chunk_bytes: int = CHUNK_BYTES) -> Iterator[bytes]:
    """GET the endpoint and yield its (decompressed) body in chunks."""
    request = urllib.request.Request(check_url(url), headers={"Accept": ACCEPT, "Accept-Encoding": "gzip",
                                                              "User-Agent": "hetpool"})
    try:
        response = opener(request, timeout)
    except urllib.error.HTTPError as exc:
        raise CollectorError(f"scrape of {url} failed: HTTP {exc.code} {exc.reason}") from None
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
