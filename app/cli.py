"""The hetpool command line: parse, dispatch, and turn user errors into one line and exit code 2."""

from __future__ import annotations

import argparse
import atexit
import os
import sys

from app.commands import add_commands
from app.commands._base import Context, OneLineParser, common_options
from app.commands._child import terminate_on_sigterm
from app.exceptions import user_errors
from app.plugins import load_plugins


def build_parser(*, lazy: bool = False) -> argparse.ArgumentParser:
    """The full parser; with lazy, each command's own parser is built only when that command is parsed."""
    common = common_options()
    parser = OneLineParser(
        prog="hetpool", parents=[common],
        description="Ops console and observability for heterogeneous AI accelerator pools.",
        epilog="example:\n  hetpool registry validate examples/fleet.yaml",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = add_commands(parser, common)
    if not lazy:
        sub.load_all()
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the hetpool console script."""
    args = build_parser(lazy=True).parse_args(argv)
    ctx = Context(args)
    from canonical.redact import redact
    from store.locks import ENV_STATS, STATS  # after parsing: the store is not needed to print help

    if os.environ.get(ENV_STATS):
        atexit.register(lambda: print(f"hetpool: {STATS.line()}", file=sys.stderr))
    try:
        with terminate_on_sigterm():  # SIGTERM unwinds like Ctrl-C: staged runs are dropped, temp files removed
            load_plugins()
            return int(args.handler(ctx))
    except KeyboardInterrupt:
        print("hetpool: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        if not isinstance(exc, user_errors()):
            raise
        print(f"hetpool: error: {redact(str(exc))}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
