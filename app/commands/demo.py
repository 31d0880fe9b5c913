"""hetpool demo: build a demo database through the real ingest pipeline."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import TextIO

from app.commands._base import Context, add_command, duration_ms, timestamp_ms

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
                   help="end of the window (default: now, rounded down to the scrape interval); pass it for a "
                        "repeatable build")
    p.add_argument("--registry", default=str(FLEET), metavar="FILE",
                   help="fleet registry to scale down (default: examples/fleet.yaml)")
    p.add_argument("--replace", action="store_true",
                   help="replace a database that already holds data (refused while another process writes to it)")


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
    """Build the demo into a file beside --db, then swap it into place (refusing to replace held samples
    unless --replace, and refusing --replace while another process writes to the database)."""
    import yaml  # here, not at the top: `hetpool demo --help` loads no layer

    from app.demo.build import DemoSpec, build_demo, demo_fleet
    from app.demo.exceptions import DemoError
    from app.demo.onboarding import localize_evidence
    from pool_registry import load_registry, registry_to_dict
    from store import Held, connect, schema_version
    from store.replace import building_path, discard, refuse_held_data, remove_stale, replace_database

    args = ctx.args
    end = args.end if args.end is not None else int(time.time() * 1000) // args.interval * args.interval
    spec = DemoSpec(end_ms=end, days=args.days, devices_per_pool=args.devices_per_pool, interval_ms=args.interval,
                    seed=args.seed)
    registry = load_registry(args.registry)
    path = ctx.db_path
    if path.parent and not path.parent.exists():
        raise DemoError(f"cannot create {str(path)!r}: folder {str(path.parent)!r} does not exist")
    store = ctx.store()
    if args.replace:
        with store.gate.sole_writer("replace"):
            pass  # refuse now rather than after the build; the swap checks again
    else:
        refuse_held_data(store)
    building = building_path(path)
    remove_stale(path)
    # the fleet file first (under a hidden name until the database is swapped in), and the registry stored is the
    # one loading it gives: `hetpool registry load` of the demo's own fleet then stores no new snapshot
    fleet_file = path.with_name(f"{path.stem}.fleet.yaml")
    staged = fleet_file.with_name(f".{fleet_file.name}.new")
    staged.write_text(f"# The demo's fleet: {args.registry} scaled to {spec.devices_per_pool} devices per pool.\n"
                      "# Edit it and load it with 'hetpool registry load' to see the change in the console.\n"
                      + yaml.safe_dump(registry_to_dict(localize_evidence(
                          demo_fleet(registry, spec, args.registry), fleet_file.parent, f"{path.stem}.evidence")),
                          sort_keys=False), encoding="utf-8")
    fleet = load_registry(staged)
    ctx.note(f"building the demo in {path}: {spec.days:g} days, {spec.devices_per_pool} devices per pool, "
             f"one scrape every {spec.interval_ms / 1000:g}s, seed {spec.seed}")
    try:
        con = connect(building)
        try:
            report = build_demo(Held(con), registry, spec, args.registry, ProgressBar(ctx.err), fleet, fleet_file)
            version = schema_version(con)
        finally:
            con.close()
        replace_database(store, building, keep_data=not args.replace, what="hetpool demo (swapping in the new file)")
        staged.replace(fleet_file)
    finally:
        discard(building)
        staged.unlink(missing_ok=True)
    ctx.emit({**report.__dict__, "db": str(path), "schema_version": version, "fleet": str(fleet_file)},
             f"demo: {report.pools} pools, {report.devices} devices; {report.rows:,} samples stored from "
             f"{report.read:,} exposition lines ({report.rejected} rejected) and {report.requests:,} requests, in "
             f"{path} in {report.seconds:.1f}s; its fleet is in {fleet_file}. Next: hetpool --db {path} console")
    return 0
