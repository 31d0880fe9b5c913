"""hetpool ingest file PATH / hetpool ingest scrape URL: exporter metrics into canonical samples."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from app.commands._base import Context, add_command, duration_ms, timestamp_ms
from app.exceptions import UsageError

if TYPE_CHECKING:
    from collectors.pipeline import IngestOptions, IngestReport

# The handlers import the collectors, so that `hetpool ingest file --help` loads no layer.

SHOW_REASONS = 5
COUNT_KEYS = ("read", "stored", "rejected", "duplicates", "ignored")


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--pool", help="put every sample in this pool (default: the registry's assign rules)")
    p.add_argument("--profile", help="read every metric with this profile (default: detect per metric name)")
    p.add_argument("--profiles-dir", action="append", default=[], metavar="DIR",
                   help="extra profile YAML files (repeatable); a profile here replaces a shipped one of the "
                        "same name")
    p.add_argument("--node", help="node of samples that carry no node label")
    p.add_argument("--canonical", action="store_true",
                   help="the input is canonical series, as 'hetpool serve-feed' serves them and 'hetpool rules' "
                        "records them: no vendor profile, values already in canonical units, pool, node and device "
                        "from the labels (the pool must be in the registry), every other label an attribute")


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """Add `ingest file` and `ingest scrape`."""
    p = add_command(sub, "file", help="ingest an exporter's /metrics text (Prometheus or OpenMetrics format) from "
                                      "a file, streaming, with vendor profiles detected per metric",
                    example="hetpool ingest file dcgm.prom --at 2026-11-29T08:00:00Z\n"
                            "  hetpool ingest file feed.prom --canonical  # a saved scrape of 'hetpool serve-feed'",
                    handler=run_file,
                    common=common)
    p.add_argument("path", help="exposition file (.gz is read compressed)")
    _common(p)
    p.add_argument("--at", type=timestamp_ms, metavar="ISO_TIME",
                   help="time of samples without a timestamp (default: now)")
    p = add_command(sub, "scrape", help="scrape a live /metrics endpoint, once or every interval; each scrape "
                                        "is its own ingest run",
                    example="hetpool ingest scrape http://gpu-node-1:9400/metrics --every 15s --count 4\n"
                            "  hetpool ingest scrape http://hetpool-edge:9464/metrics --canonical  # another feed",
                    handler=run_scrape, common=common)
    p.add_argument("url", help="http(s) URL of the endpoint")
    _common(p)
    p.add_argument("--every", type=duration_ms, default=15_000, metavar="DURATION",
                   help="time between scrapes (default 15s)")
    p.add_argument("--count", type=int, default=1, metavar="N", help="number of scrapes (default 1)")


def _options(args: argparse.Namespace) -> IngestOptions:
    from collectors.pipeline import IngestOptions

    if args.canonical and args.node is not None:
        raise UsageError("--node does not apply with --canonical: a canonical series names its node")
    return IngestOptions(pool=args.pool, profile=args.profile,
                         profiles_dirs=tuple(Path(d) for d in args.profiles_dir), node=args.node,
                         at_ms=getattr(args, "at", None), canonical=args.canonical)


FOLDED = ("an error code at 'no error' or repeating the device's last one, such as XID 0 at every scrape, or an "
          "unchanged error counter: no new event")


def duplicates_said(duplicates: int, folded: int) -> str | None:
    """What the duplicates of a run were, in words (None when there were none)."""
    if not duplicates:
        return None
    stored = duplicates - folded
    parts = ([f"{folded} folded reading{'s' if folded != 1 else ''} ({FOLDED})"] if folded else []) + (
        [f"{stored} already stored by an earlier run"] if stored else [])
    return f"duplicates {duplicates}: " + "; ".join(parts)


def _text(report: IngestReport) -> list[str]:
    c = report.counts
    lines = [f"{report.source}: read {c.read}, stored {c.stored}, rejected {c.rejected}, "
             f"duplicates {c.duplicates}, ignored {c.ignored} (run {report.run_id})"]
    said = duplicates_said(c.duplicates, report.folded)
    if said:
        lines.append(f"  {said}")
    for reason, n in report.reasons.most_common(SHOW_REASONS):
        lines.append(f"  rejected {n}: {reason}")
    if len(report.reasons) > SHOW_REASONS:
        lines.append(f"  ... {len(report.reasons) - SHOW_REASONS} more reasons in table rejects "
                     f"(run {report.run_id})")
    lines.extend(f"  warning: {w}" for w in report.warnings)
    return lines


def _emit(ctx: Context, reports: list[IngestReport]) -> None:
    totals = {k: sum(r.as_dict()[k] for r in reports) for k in COUNT_KEYS}
    data = {**totals, "folded": sum(r.folded for r in reports), "runs": [r.run_id for r in reports],
            "source": reports[0].source if reports else "",
            "warnings": [w for r in reports for w in r.warnings]}
    ctx.emit(data, "\n".join(line for r in reports for line in _text(r)))


def run_file(ctx: Context) -> int:
    """One file, one run."""
    from collectors.files import read_chunks
    from collectors.pipeline import ingest_exposition, make_context

    options = _options(ctx.args)
    store = ctx.store().ensure("hetpool ingest file")
    context = make_context(store, options)
    for name in context.profiles.replaced:
        ctx.note(f"profile '{name}' from --profiles-dir replaces the shipped one")
    path = ctx.args.path
    report = ingest_exposition(store, lambda: read_chunks(path), kind="file", source=str(path), options=options,
                               context=context)
    _emit(ctx, [report])
    return 0


def run_scrape(ctx: Context) -> int:
    """N scrapes, each its own run; progress on stderr."""
    from collectors.pipeline import ingest_scrapes

    args = ctx.args
    if args.count < 1:
        raise UsageError(f"--count must be at least 1, got {args.count}")
    store = ctx.store().ensure("hetpool ingest scrape")
    reports = ingest_scrapes(
        store, args.url, _options(args), count=args.count, every_s=args.every / 1000,
        on_report=lambda r: ctx.note(f"scrape {r.run_id}: read {r.counts.read}, stored {r.counts.stored}, "
                                     f"ignored {r.counts.ignored}")
        if args.count > 1 else None)
    _emit(ctx, reports)
    return 0
