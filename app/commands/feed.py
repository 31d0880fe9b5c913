"""hetpool serve-feed: the newest canonical values for Prometheus (or any OpenMetrics scraper) to scrape."""

from __future__ import annotations

import argparse
import os
import time

from app.commands._base import Context, add_command, duration_ms
from app.commands._choices import FEED_ENV_TOKEN, FEED_MAX_SERIES, FEED_REFRESH_S, FEED_WINDOW_MS
from app.exceptions import UsageError

# run imports the feed server and the store, so that `hetpool serve-feed --help` loads no layer.


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """Add the serve-feed command."""
    p = add_command(sub, "serve-feed",
                    help="serve the newest canonical value of every series at /metrics in Prometheus/OpenMetrics "
                         f"text; with ${FEED_ENV_TOKEN} set, requests need 'Authorization: Bearer <token>'",
                    example="hetpool serve-feed --port 9464  # then: curl http://127.0.0.1:9464/metrics",
                    handler=run, common=common)
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1, loopback only)")
    p.add_argument("--port", type=int, default=9464, help="port to listen on (default: 9464; 0 picks a free one)")
    p.add_argument("--window", type=duration_ms, default=FEED_WINDOW_MS, metavar="DURATION",
                   help="serve series and versions whose newest sample is at most this much older than the newest "
                        "sample in the store; error totals count every stored event (default: 5m)")
    p.add_argument("--max-series", type=int, default=FEED_MAX_SERIES, metavar="N",
                   help=f"serve at most N series, the rest counted in hetpool_feed_series_dropped "
                        f"(default: {FEED_MAX_SERIES:,})")
    p.add_argument("--refresh", type=duration_ms, default=int(FEED_REFRESH_S * 1000), metavar="DURATION",
                   help="scrapes this close together share one read of the store (default: 1s)")


def run(ctx: Context) -> int:
    """Serve until SIGTERM or Ctrl-C, then close the socket and exit 0."""
    from app.serve.feed import ENV_TOKEN, FeedServer, store_reader
    from store import StoreError

    a = ctx.args
    if not 0 <= a.port <= 65535:
        raise UsageError(f"--port {a.port} is not a TCP port (0-65535)")
    if a.max_series < 1:
        raise UsageError(f"--max-series must be at least 1, got {a.max_series}")
    store = ctx.store()
    if not store.exists():
        raise StoreError(f"database {str(store.path)!r} does not exist; run 'hetpool init' or 'hetpool demo' first")
    token = os.environ.get(ENV_TOKEN, "").strip() or None
    try:
        server = FeedServer(a.host, a.port, store_reader(store, a.window), token,
                            log=lambda line: ctx.note(f"hetpool serve-feed: {line}"), max_series=a.max_series,
                            refresh_s=a.refresh / 1000.0)
    except OSError as exc:
        raise UsageError(f"cannot listen on {a.host}:{a.port}: {exc.strerror or exc}") from None
    server.start()
    guard = f"; requests need the bearer token in ${ENV_TOKEN}" if token else ""
    ctx.note(f"hetpool serve-feed: serving {store.path} on {server.url}/metrics{guard}")
    try:
        while True:
            time.sleep(0.5)
    except KeyboardInterrupt:
        ctx.note("hetpool serve-feed: stopping")
    finally:
        server.stop()
    return 0
