"""hetpool prune: drop old raw samples, keeping the rollups."""

from __future__ import annotations

import argparse
import datetime as dt
import time

from app.commands._base import Context, add_command, duration_ms


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """Add the prune command."""
    p = add_command(sub, "prune", help="drop raw samples older than a retention period; rollups are kept",
                    example="hetpool prune --keep-raw 14d", handler=run, common=common)
    p.add_argument("--keep-raw", type=duration_ms, required=True, metavar="DURATION",
                   help="how much raw history to keep, such as 14d or 36h")


def run(ctx: Context) -> int:
    """Prune in one transaction and report what went."""
    from store.rollups import prune_raw  # here, not at the top: `hetpool prune --help` needs no DuckDB

    with ctx.store().write(f"hetpool prune --keep-raw {ctx.args.keep_raw // 1000}s") as con:
        deleted, horizon = prune_raw(con, ctx.args.keep_raw, int(time.time() * 1000))
    when = dt.datetime.fromtimestamp(horizon / 1000, dt.UTC).isoformat(timespec="seconds")
    ctx.emit({"deleted": deleted, "raw_horizon_ms": horizon, "raw_horizon": when},
             f"deleted {deleted} raw samples older than {when}; rollups before it are kept")
    return 0
