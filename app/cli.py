"""The hetpool command line: parse, dispatch, and turn user errors into one line and exit code 2."""

from __future__ import annotations

import argparse
import atexit
import os
import sys

from app.commands import MODULES
from app.commands._base import Context, OneLineParser, common_options
from app.commands._child import terminate_on_sigterm
from app.errors import USER_ERRORS
from canonical.redact import redact
from store.locks import ENV_STATS, STATS


def build_parser() -> argparse.ArgumentParser:
    """The full parser with every command registered."""
    common = common_options()
    parser = OneLineParser(
        prog="hetpool", parents=[common],
        description="Ops console and observability for heterogeneous AI accelerator pools.",
        epilog="example:\n  hetpool registry validate examples/fleet.yaml",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module in MODULES:
        module.register(sub, common)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the hetpool console script."""
    args = build_parser().parse_args(argv)
    ctx = Context(args)
    if os.environ.get(ENV_STATS):
        atexit.register(lambda: print(f"hetpool: {STATS.line()}", file=sys.stderr))
    try:
        with terminate_on_sigterm():  # SIGTERM unwinds like Ctrl-C: staged runs are dropped, temp files removed
            return int(args.handler(ctx))
    except USER_ERRORS as exc:
        print(f"hetpool: error: {redact(str(exc))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("hetpool: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
