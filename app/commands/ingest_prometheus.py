"""hetpool ingest prometheus: incremental pulls from any Prometheus-API store."""

from __future__ import annotations

import argparse
import datetime as dt
from pathlib import Path
from typing import TYPE_CHECKING

from app.commands._base import Context, add_command, duration_ms, timestamp_ms
from app.commands._choices import PROM_ENV_PASSWORD, PROM_ENV_TOKEN, PROM_ENV_USER
from app.exceptions import UsageError
from canonical.timeunits import HOUR_MS

if TYPE_CHECKING:
    from collectors.prometheus import PullReport

# run imports the collectors, so that `hetpool ingest prometheus --help` loads no layer.

INCOMPLETE = 1  # some chunks could not be fetched: not a usage error, but the caller must know


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """Add `ingest prometheus`."""
    p = add_command(
        sub, "prometheus",
        help=f"pull the series every profile knows from a Prometheus-API store (Prometheus, Thanos, Mimir, "
             f"VictoriaMetrics), chunk by chunk from the last watermark; credentials come from ${PROM_ENV_TOKEN} "
             f"or ${PROM_ENV_USER}/${PROM_ENV_PASSWORD}",
        example="hetpool ingest prometheus --url http://prometheus:9090 --since 6h --step 15s\n"
                "  hetpool ingest prometheus --url http://prometheus:9090 --canonical --step 1m  # recorded rules",
        handler=run, common=common)
    p.add_argument("--url", required=True, help="base URL of the Prometheus HTTP API")
    window = p.add_mutually_exclusive_group()
    window.add_argument("--since", type=duration_ms, default=HOUR_MS, metavar="DURATION",
                        help="how far back the first pull goes when no watermark exists (default 1h)")
    window.add_argument("--start", type=timestamp_ms, metavar="ISO_TIME",
                        help="pull this exact window instead of continuing from the watermark (with --end)")
    p.add_argument("--end", type=timestamp_ms, metavar="ISO_TIME", help="end of the window (default: now - step)")
    p.add_argument("--step", type=duration_ms, default=15_000, metavar="DURATION",
                   help="scrape interval of the data; sizes chunks and --follow's polling (default 15s); with "
                        "--canonical also the resolution stored: one sample per step, the value at each multiple "
                        "of the step (a range query), so with --step 1m raw 15 s series stay in the TSDB and the "
                        "store holds canonical minutes")
    p.add_argument("--chunk", type=duration_ms, default=HOUR_MS, metavar="DURATION",
                   help="longest time window per query (default 1h; capped at 11,000 steps)")
    p.add_argument("--profile", action="append", default=[], metavar="NAME",
                   help="pull only this profile's metrics (repeatable; default: every profile with metrics there)")
    p.add_argument("--profiles-dir", action="append", default=[], metavar="DIR", help="extra profile YAML files")
    p.add_argument("--pool", help="put every sample in this pool (default: the registry's assign rules)")
    p.add_argument("--canonical", action="store_true",
                   help="pull canonical series (what 'hetpool rules' records, or a scraped 'hetpool serve-feed') "
                        "instead of vendor series: no profile, pool, node and device from the labels (the pool "
                        "must be in the registry), one watermark for the whole pull")
    p.add_argument("--follow", action="store_true", help="keep polling every step until interrupted")
    p.add_argument("--timeout", type=duration_ms, default=60_000, metavar="DURATION",
                   help="per-request timeout (default 60s)")
    p.add_argument("--retries", type=int, default=4, metavar="N",
                   help="attempts per query before its chunk is reported missing (default 4)")
    p.add_argument("--insecure", action="store_true", help="skip TLS certificate verification (not recommended)")


def _when(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).isoformat(timespec="seconds")


def _print(ctx: Context, report: PullReport) -> None:
    totals = report.totals()
    missing = [{"profile": p, "after": _when(lo), "until": _when(hi)} for p, lo, hi in report.missing]
    watermarks = {p: _when(ms) for p, ms in report.watermarks.items()}
    warnings = [w for r in report.reports for w in r.warnings]
    data = {**totals, "chunks": len(report.reports), "missing": missing, "watermarks": watermarks,
            "warnings": warnings}
    lines = [f"read {totals['read']}, stored {totals['stored']}, rejected {totals['rejected']}, "
             f"duplicates {totals['duplicates']}, ignored {totals['ignored']} in {len(report.reports)} chunks"]
    lines += [f"  {p}: up to {w}" for p, w in watermarks.items()]
    lines += [f"  missing {m['profile']} ({m['after']}, {m['until']}]: re-run to fetch it" for m in missing]
    lines += [f"  warning: {w}" for w in warnings]
    ctx.emit(data, "\n".join(lines))


def run(ctx: Context) -> int:
    """One pull (or --follow polls); exit 1 when chunks are missing."""
    from collectors.prometheus import PullOptions, follow, pull
    from collectors.promhttp import PromAuth, PromClient, RetryPolicy

    args = ctx.args
    if args.retries < 1:
        raise UsageError(f"--retries must be at least 1, got {args.retries}")
    if args.canonical and (args.profile or args.profiles_dir or args.pool):
        raise UsageError("--profile, --profiles-dir and --pool do not apply with --canonical: canonical series name "
                         "their pool and need no profile")
    if args.start is not None and args.end is not None and args.end <= args.start:
        raise UsageError(f"--end {_when(args.end)} is not after --start {_when(args.start)}")
    options = PullOptions(url=args.url, profiles=tuple(args.profile), start_ms=args.start, end_ms=args.end,
                          since_ms=args.since, step_ms=args.step, chunk_ms=args.chunk,
                          profiles_dirs=tuple(Path(d) for d in args.profiles_dir), pool=args.pool,
                          canonical=args.canonical)
    client = PromClient(args.url, PromAuth.from_env(), verify=not args.insecure,
                        retry=RetryPolicy(attempts=args.retries, timeout_s=args.timeout / 1000))
    store = ctx.store().ensure("hetpool ingest prometheus")
    missing = False
    if args.follow:
        def show(report: PullReport) -> None:
            nonlocal missing
            missing = missing or bool(report.missing)
            _print(ctx, report)

        try:
            follow(store, client, options, on_pull=show)
        except KeyboardInterrupt:
            ctx.note("stopped following")
    else:
        def progress(profile: str, lo: int, hi: int) -> None:
            ctx.note(f"{profile}: stored up to {_when(hi)}")

        report = pull(store, client, options, on_chunk=progress)
        missing = bool(report.missing)
        _print(ctx, report)
    return INCOMPLETE if missing else 0
