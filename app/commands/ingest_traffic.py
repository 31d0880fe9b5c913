"""hetpool ingest traffic PATH: request traces into the requests table, idempotently."""

from __future__ import annotations

import argparse
import datetime as dt
import os
from pathlib import Path
from typing import TYPE_CHECKING

from app.commands._base import Context, add_command
from app.commands._choices import TRACE_FORMATS, TRACE_START
from app.exceptions import UsageError

if TYPE_CHECKING:
    from traces import ParseOptions

# The layers are imported in the functions that run the command, so that this --help, and replay's that shares
# add_traffic_options, load none of them.

SHOW_REJECTS = 5


def parse_time(text: str, flag: str) -> int:
    """Epoch ms of an ISO 8601 argument (UTC when it has no zone)."""
    from traces import epoch_ms

    try:
        return epoch_ms(dt.datetime.fromisoformat(text))
    except ValueError:
        raise UsageError(f"{flag} {text!r}: expected an ISO 8601 time such as 2025-01-01T00:00:00Z") from None


def positive(text: str) -> float:
    """argparse type for a number > 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a number > 0, got {text!r}")
    return value


def time_scale(text: str) -> float:
    """argparse type for --time-scale: a factor from 1/1000 to 1000."""
    value = positive(text)
    if not 1e-3 <= value <= 1e3:
        raise argparse.ArgumentTypeError(f"expected a factor from 0.001 to 1000, got {text!r}")
    return value


def add_traffic_options(p: argparse.ArgumentParser) -> None:
    """--format, --model, --sla-tier, --time-scale and --start-at, shared with the replay commands."""
    p.add_argument("--format", default="auto", choices=("auto", *TRACE_FORMATS),
                   help="trace format (default: detect from the name and first bytes)")
    p.add_argument("--model", help="model of requests that name none (Azure and BurstGPT never do)")
    p.add_argument("--sla-tier", help="SLA tier of requests that name none (default: standard)")
    p.add_argument("--time-scale", type=time_scale, default=1.0, metavar="X",
                   help="divide every arrival's offset from the first by X (2 = twice the request rate)")
    p.add_argument("--start-at", metavar="ISO", default=TRACE_START,
                   help="time of offset 0 in relative traces (Mooncake, BurstGPT); default "
                        f"{TRACE_START}, fixed so that re-ingest is idempotent")
    p.add_argument("--block-tokens", type=block_tokens, metavar="N",
                   help="tokens per prefix block of the trace's hash_ids (Mooncake: 512 unless given)")


def parse_options(args: argparse.Namespace) -> ParseOptions:
    """ParseOptions from the shared traffic flags."""
    from canonical.timebounds import max_age_ms
    from traces import ParseOptions

    try:
        age_ms = max_age_ms(os.environ)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    return ParseOptions(model=args.model, sla_tier=args.sla_tier, start_ms=parse_time(args.start_at, "--start-at"),
                        time_scale=args.time_scale, block_tokens=args.block_tokens, max_age_ms=age_ms)


def block_tokens(text: str) -> int:
    """--block-tokens: a whole number of tokens, at least 1."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"'{text}': expected a whole number of tokens per block, at least 1")
    return value


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """Add `ingest traffic`."""
    p = add_command(sub, "traffic", help="load a request trace (Azure, Mooncake, BurstGPT, or hetpool "
                                         "CSV/JSONL/Parquet) into the requests table",
                    example="hetpool ingest traffic ../shared/corpus/traces/azure_AzureLLMInferenceTrace_conv.csv "
                            "--model llama-3.1-70b", handler=run, common=common)
    p.add_argument("path", help="trace file")
    p.add_argument("--trace", help="name to store the requests under (default: the file name)")
    add_traffic_options(p)


def run(ctx: Context) -> int:
    """Parse, then store new requests and every reject in one transaction."""
    from collectors.traffic import ingest_traffic
    from traces import read_traffic

    args = ctx.args
    fmt, parsed = read_traffic(args.path, args.format, parse_options(args))
    trace = args.trace or Path(args.path).name
    ingest = ingest_traffic(ctx.store().ensure("hetpool ingest traffic"), parsed, trace=trace, source=str(args.path))
    counts = ingest.counts
    lines = [f"{args.path} ({fmt}) as trace {trace!r}: read {counts.read}, stored {counts.stored}, "
             f"rejected {counts.rejected}, duplicates {counts.duplicates}"]
    for row in parsed.rejects.head(SHOW_REJECTS).iter_rows(named=True):
        lines.append(f"  line {row['line']}: {row['reason']}")
    if parsed.rejects.height > SHOW_REJECTS:
        lines.append(f"  ... and {parsed.rejects.height - SHOW_REJECTS} more rejects (table rejects, "
                     f"run {ingest.run_id})")
    ctx.emit({"trace": trace, "format": fmt, "run_id": ingest.run_id, **counts.as_dict(),
              "rejects": parsed.rejects.head(100).to_dicts()}, "\n".join(lines))
    return 0
