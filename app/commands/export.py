"""hetpool export: the normalized feed as CSV, JSONL or Parquet."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from app.commands._base import Context, add_command, timestamp_ms
from app.commands._choices import EXPORT_FORMATS, EXPORT_RESOLUTIONS
from app.exceptions import UsageError

if TYPE_CHECKING:
    from store.exports import ExportFilter


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """Add the export command."""
    p = add_command(sub, "export", help="write canonical samples (ts,pool,node,device,metric,value,attributes) "
                                        "to CSV, JSONL or Parquet; with --partition, a Parquet lake "
                                        "date=/pool= that each re-run brings up to date",
                    example="hetpool export --format parquet --out lake/ --partition",
                    handler=run, common=common)
    p.add_argument("--format", required=True, choices=EXPORT_FORMATS, help="output format")
    p.add_argument("--out", required=True, metavar="PATH", help="output file, or folder for partitioned Parquet")
    p.add_argument("--start", type=timestamp_ms, metavar="ISO_TIME", help="first time included (UTC when no zone)")
    p.add_argument("--end", type=timestamp_ms, metavar="ISO_TIME", help="first time excluded")
    p.add_argument("--pool", action="append", default=[], help="only this pool (repeatable)")
    p.add_argument("--metric", action="append", default=[], help="only this canonical metric (repeatable)")
    p.add_argument("--partition", action="store_true",
                   help="write DIR/date=YYYY-MM-DD/pool=ID/part-0.parquet with _schema.json and _manifest.json; "
                        "a re-run writes only new and changed partitions, each atomically")
    p.add_argument("--resolution", choices=EXPORT_RESOLUTIONS, default="auto",
                   help="raw samples, or 1m/1h rollups (value = bucket average, plus min, max, last, count); "
                        "auto: raw up to 2 days if still kept, 1m up to 14 days, else 1h (default); "
                        "with --partition, auto is raw")


def run(ctx: Context) -> int:
    """Export through DuckDB's COPY, streaming."""
    from store.exports import ExportFilter, export_samples  # here, not at the top: --help needs no DuckDB

    a = ctx.args
    flt = ExportFilter(a.start, a.end, tuple(a.pool), tuple(a.metric), a.resolution)
    if a.partition:
        return _lake(ctx, flt)
    with ctx.store().read() as con:
        result = export_samples(con, a.format, a.out, flt)
    layout = " (partitioned date=/pool=)" if result.partitioned else ""
    ctx.emit({"rows": result.rows, "path": result.path, "format": a.format, "partitioned": result.partitioned,
              "resolution": result.resolution},
             f"wrote {result.rows} {result.resolution} rows to {result.path}{layout}")
    return 0


def _lake(ctx: Context, flt: ExportFilter) -> int:
    """The incremental, partitioned export: each partition is its own short read of the store."""
    from store.lake import write_lake

    if ctx.args.format != "parquet":
        raise UsageError(f"--partition writes Parquet; got --format {ctx.args.format}")
    r = write_lake(ctx.store(), ctx.args.out, flt)
    ctx.emit({"rows": r.rows, "path": r.path, "format": "parquet", "partitioned": True, "resolution": r.resolution,
              "partitions_written": r.written, "partitions_unchanged": r.unchanged, "partitions_kept": r.kept},
             f"wrote {r.rows} {r.resolution} rows in {r.written} partitions to {r.path} (partitioned as "
             f"date=YYYY-MM-DD/pool=ID/; {r.unchanged} unchanged, {r.kept} kept from earlier runs)")
    return 0
