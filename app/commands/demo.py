"""hetpool demo: build a demo database through the real ingest pipeline."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import TextIO

from app.commands._base import Context, add_command, duration_ms, timestamp_ms
from app.demo.build import DemoSpec, build_demo
from app.demo.errors import DemoError
from pool_registry import load_registry
from store import connect, schema_version

HOUR_MS = 3_600_000
FLEET = Path(__file__).resolve().parents[2] / "examples" / "fleet.yaml"


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """Add the demo command."""
    p = add_command(sub, "demo", help="build a demo database: five vendors' exporter text and Azure-shaped "
                                      "traffic, ingested through the normal pipeline",
                    example="hetpool --db demo.duckdb demo --days 2 --devices-per-pool 8", handler=run, common=common)
    p.add_argument("--days", type=float, default=2.0, help="length of the window in days (default 2)")
    p.add_argument("--devices-per-pool", type=int, default=8, metavar="N", help="devices in each pool (default 8)")
    p.add_argument("--interval", type=duration_ms, default=30_000, metavar="DURATION",
                   help="scrape interval, such as 30s or 1m (default 30s)")
    p.add_argument("--seed", type=int, default=7, help="seed of the story's random draws (default 7)")
    p.add_argument("--end", type=timestamp_ms, metavar="ISO",
                   help="end of the window (default: now, rounded down to the hour); pass it for a repeatable build")
    p.add_argument("--registry", default=str(FLEET), metavar="FILE",
                   help="fleet registry to scale down (default: examples/fleet.yaml)")
    p.add_argument("--replace", action="store_true", help="delete the database file first if it exists")


class ProgressBar:
    """A one-line text bar on a terminal; a line per tenth elsewhere, so logs stay short."""

    def __init__(self, stream: TextIO, width: int = 30):
        self.stream = stream
        self.width = width
        self.tty = stream.isatty()
        self.shown = -1
        self.started = time.perf_counter()

    def __call__(self, fraction: float, what: str) -> None:
        """Show progress `fraction` (0..1) while working on `what`."""
        filled = int(self.width * fraction)
        elapsed = time.perf_counter() - self.started
        bar = f"[{'#' * filled}{'.' * (self.width - filled)}] {fraction:4.0%} {elapsed:5.1f}s"
        if self.tty:
            print(f"\r{bar} {what:<24}", end="" if fraction < 1 else "\n", file=self.stream, flush=True)
        elif int(fraction * 10) > self.shown:
            self.shown = int(fraction * 10)
            print(f"{bar} {what}", file=self.stream, flush=True)


def run(ctx: Context) -> int:
    """Build the demo into --db (refusing a database that already holds samples unless --replace)."""
    args = ctx.args
    end = args.end if args.end is not None else int(time.time() * 1000) // HOUR_MS * HOUR_MS
    spec = DemoSpec(end_ms=end, days=args.days, devices_per_pool=args.devices_per_pool, interval_ms=args.interval,
                    seed=args.seed)
    registry = load_registry(args.registry)
    path = ctx.db_path
    if args.replace:
        for leftover in (path, path.with_name(path.name + ".wal")):
            leftover.unlink(missing_ok=True)
    con = connect(path)
    try:
        held = con.execute("SELECT count(*) FROM samples").fetchall()[0][0]
        if held:
            raise DemoError(f"database {str(path)!r} already holds {held:,} samples; build the demo into a new "
                            "file, or pass --replace to start this one over")
        ctx.note(f"building the demo in {path}: {spec.days:g} days, {spec.devices_per_pool} devices per pool, "
                 f"one scrape every {spec.interval_ms / 1000:g}s, seed {spec.seed}")
        report = build_demo(con, registry, spec, args.registry, ProgressBar(ctx.err))
        version = schema_version(con)
    finally:
        con.close()
    ctx.emit({**report.__dict__, "db": str(path), "schema_version": version},
             f"demo: {report.pools} pools, {report.devices} devices; {report.stored:,} samples from {report.read:,} "
             f"exposition lines ({report.rejected} rejected) and {report.requests:,} requests stored in {path} "
             f"in {report.seconds:.1f}s. Next: hetpool --db {path} console")
    return 0

