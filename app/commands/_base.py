"""Shared plumbing of CLI commands: the context, command registration with examples, output."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from canonical.timeunits import parse_duration_ms

if TYPE_CHECKING:  # the store is imported when a command opens it, so `hetpool --help` does not load DuckDB
    from store import Store


@dataclass
class Context:
    """What every command receives: parsed args plus the output streams."""

    args: argparse.Namespace
    out: TextIO = field(default_factory=lambda: sys.stdout)
    err: TextIO = field(default_factory=lambda: sys.stderr)

    @property
    def as_json(self) -> bool:
        """True when --json was given."""
        return bool(getattr(self.args, "json", False))

    @property
    def db_path(self) -> Path:
        """--db, $HETPOOL_DB or ./hetpool.duckdb."""
        from store import resolve_db_path

        return resolve_db_path(getattr(self.args, "db", None))

    def store(self) -> Store:
        """The database this invocation points at, opened only for each read or commit; waits are told on stderr."""
        from store import Store

        return Store(self.db_path, on_wait=lambda message: self.note(f"hetpool: {message}"))

    def emit(self, data: Any, text: str) -> None:
        """Print JSON with --json, else the human text."""
        if self.as_json:
            print(json.dumps(data, indent=2, sort_keys=True, default=str), file=self.out)
        elif text:
            print(text, file=self.out)

    def note(self, message: str) -> None:
        """A progress or status line for humans, kept off stdout so JSON stays clean."""
        print(message, file=self.err)


Handler = Callable[[Context], int]


class OneLineParser(argparse.ArgumentParser):
    """An argparse parser whose errors are one line and exit 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")


def common_options() -> argparse.ArgumentParser:
    """--db and --json, accepted before or after the command name."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--db", default=argparse.SUPPRESS, metavar="PATH",
                        help="DuckDB file (default: $HETPOOL_DB or ./hetpool.duckdb)")
    common.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                        help="machine-readable output")
    return common


def add_command(sub: argparse._SubParsersAction, name: str, *, help: str, example: str,
                handler: Handler, common: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add a leaf command whose help ends with a runnable example."""
    parser: argparse.ArgumentParser = sub.add_parser(
        name, help=help, description=help, parents=[common],
        epilog=f"example:\n  {example}", formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.set_defaults(handler=handler)
    return parser


def add_group(sub: argparse._SubParsersAction, name: str, *, help: str) -> argparse._SubParsersAction:
    """Add a command group such as 'registry' and return its subcommand set."""
    group = sub.add_parser(name, help=help, description=help)
    return group.add_subparsers(dest=f"{name}_command", metavar="COMMAND", required=True)


def duration_ms(text: str) -> int:
    """argparse type for durations such as 15s, 6h, 14d or 1h30m; returns milliseconds."""
    try:
        return parse_duration_ms(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def timestamp_ms(text: str) -> int:
    """argparse type for ISO-8601 times (a time without zone is UTC); returns epoch milliseconds."""
    try:
        value = dt.datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"bad time {text!r}; expected ISO-8601 like 2026-11-29T08:00:00Z") from None
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.UTC)
    return int(value.timestamp() * 1000)
