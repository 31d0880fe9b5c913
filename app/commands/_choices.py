"""Names and defaults the parsers show, written here so that a command's --help needs no layer to build them.

Each is a copy of a layer's value; tests/test_commands.py checks that every one equals it, so they cannot drift.
"""

from __future__ import annotations

TRACE_FORMATS = ("azure", "burstgpt", "csv", "jsonl", "mooncake", "parquet")  # sorted(traces.FORMATS)
TRACE_START = "2025-01-01T00:00:00+00:00"  # traces.DEFAULT_START.isoformat()
SWEEP_EXECUTORS = ("process", "ray")  # replay.sweep.EXECUTORS
BENCH_ARRIVALS = ("staggered", "lockstep")  # replay.bench.ARRIVALS
BENCH_RANGE_STYLES = ("around", "up_to")  # replay.bench.RANGE_STYLES
PLAN_CONCURRENCY = (1, 16, 64)  # replay.planner.DEFAULT_CONCURRENCY
EXPORT_FORMATS = ("csv", "jsonl", "parquet")  # store.exports.FORMATS
EXPORT_RESOLUTIONS = ("auto", "raw", "1m", "1h")  # store.exports.RESOLUTIONS
PROM_ENV_TOKEN = "HETPOOL_PROM_TOKEN"  # collectors.promhttp.ENV_TOKEN
PROM_ENV_USER = "HETPOOL_PROM_USER"  # collectors.promhttp.ENV_USER
PROM_ENV_PASSWORD = "HETPOOL_PROM_PASSWORD"  # collectors.promhttp.ENV_PASSWORD
FEED_ENV_TOKEN = "HETPOOL_FEED_TOKEN"  # app.serve.feed.ENV_TOKEN
FEED_WINDOW_MS = 5 * 60_000  # app.serve.feed.DEFAULT_WINDOW_MS
FEED_MAX_SERIES = 100_000  # app.serve.feed.DEFAULT_MAX_SERIES
FEED_REFRESH_S = 1.0  # app.serve.feed.DEFAULT_REFRESH_S
