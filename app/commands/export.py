"""hetpool export: the normalized feed as CSV, JSONL or Parquet."""

from __future__ import annotations

import argparse

from app.commands._base import Context, add_command, timestamp_ms
from store.exports import FORMATS, RESOLUTIONS, ExportFilter, export_samples


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """Add the export command."""
    p = add_command(sub, "export", help="write canonical samples (ts,pool,node,device,metric,value,attributes) "
                                        "to CSV, JSONL or Parquet; Parquet to a folder is partitioned "
                                        "date=/pool=",
                    example="hetpool export --format parquet --out feed/ --start 2026-11-28T00:00:00Z",
                    handler=run, common=common)
    p.add_argument("--format", required=True, choices=FORMATS, help="output format")
    p.add_argument("--out", required=True, metavar="PATH", help="output file, or folder for partitioned Parquet")
    p.add_argument("--start", type=timestamp_ms, metavar="ISO_TIME", help="first time included (UTC when no zone)")
    p.add_argument("--end", type=timestamp_ms, metavar="ISO_TIME", help="first time excluded")
    p.add_argument("--pool", action="append", default=[], help="only this pool (repeatable)")
    p.add_argument("--metric", action="append", default=[], help="only this canonical metric (repeatable)")
    p.add_argument("--resolution", choices=RESOLUTIONS, default="auto",
                   help="raw samples, or 1m/1h rollups (value = bucket average, plus min, max, last, count); "
                        "auto: raw up to 2 days if still kept, 1m up to 14 days, else 1h (default)")


def run(ctx: Context) -> int:
    """Export through DuckDB's COPY, streaming."""
    a = ctx.args
    flt = ExportFilter(a.start, a.end, tuple(a.pool), tuple(a.metric), a.resolution)
    with ctx.store().read() as con:
        result = export_samples(con, a.format, a.out, flt)
    layout = " (partitioned date=/pool=)" if result.partitioned else ""
    ctx.emit({"rows": result.rows, "path": result.path, "format": a.format, "partitioned": result.partitioned,
              "resolution": result.resolution},
             f"wrote {result.rows} {result.resolution} rows to {result.path}{layout}")
    return 0
