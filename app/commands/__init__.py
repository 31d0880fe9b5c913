"""CLI commands by name; a command's module is imported only when that command runs, so `hetpool --help` is quick.

To add a command: one entry in COMMANDS (its name, its module under app/commands/, and the help line that
`hetpool --help` lists, the same text the module's register(subparsers, common) gives add_command or add_group;
tests/test_commands.py checks that the two agree). A group whose subcommands live in several modules (`ingest`)
lists them in a table of its own the same way, through add_commands. A module imports its layers in its
handlers, so that its --help loads none of them; tests/test_commands.py checks every command for that.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Command:
    """Where a top-level command lives and what `hetpool --help` says of it, known without importing it."""

    module: str
    help: str


COMMANDS: dict[str, Command] = {
    "init": Command("init", "create the DuckDB file, or bring its schema up to date"),
    "registry": Command("registry", "validate, load and show the fleet registry"),
    "profile": Command("profile", "check vendor exporter profiles"),
    "check": Command("check", "lint an exporter's /metrics output (a file or a live URL) as OpenMetrics or Prometheus "
                              "text, and show which families the profiles map, ignore or do not know, and which core "
                              "canonical metrics are missing; exit 0 when valid and complete, 1 when not"),
    "ingest": Command("ingest", "bring metrics or traffic into the database"),
    "export": Command("export", "write canonical samples (ts,pool,node,device,metric,value,attributes) to CSV, JSONL "
                                "or Parquet; with --partition, a Parquet lake date=/pool= that each re-run brings up "
                                "to date"),
    "prune": Command("prune", "drop raw samples older than a retention period; rollups are kept"),
    "replay": Command("replay", "replay traffic against candidate routing and cost models"),
    "plan": Command("plan", "propose TP x PP x EP layouts of a model on each pool: memory per device, TTFT/TPOT and "
                            "cost from the replay's step model, best first"),
    "versions": Command("versions", "print declared against observed versions per pool (drift flagged), model x "
                                    "pool compatibility and metric coverage by exporter version; exit 1 on drift, an "
                                    "incompatible served model or a vanished metric"),
    "alerts": Command("alerts", "evaluate the status rules on the console's default window (the last 24 hours up to "
                                "the hour of the newest sample) and print every status that is not ok with its level, "
                                "scope and reason; exit 1 when one is critical"),
    "onboarding": Command("onboarding", "print each onboarding pool's stages, checklist (pass, fail, pending, with "
                                        "the evidence) and days from the start against the three-day bar; "
                                        "'add-evidence POOL ITEM FILE...' stores an evidence file"),
    "demo": Command("demo", "build a demo database: five vendors' exporter text and Azure-shaped traffic, ingested "
                            "through the normal pipeline"),
    "console": Command("console", "serve the Streamlit console on the database"),
    "serve": Command("serve", "run the collectors a YAML file declares, each on its schedule, with the console, a "
                              "health endpoint and, when the file asks, the lake export on its schedule and the feed; "
                              "SIGTERM stops it cleanly"),
    "serve-feed": Command("feed", "serve the newest canonical value of every series at /metrics in "
                                  "Prometheus/OpenMetrics text; with $HETPOOL_FEED_TOKEN set, requests need "
                                  "'Authorization: Bearer <token>'"),
    "rules": Command("rules", "compile the vendor profiles into Prometheus recording rules that produce the canonical "
                              "series under the feed's names and labels, and alerting rules for the fatal error "
                              "classes"),
}


class LazyCommands(argparse._SubParsersAction):
    """A set of subcommands (the top level's, or a group's such as `ingest`): each listed from its table at once,
    its parser built by its module when named."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.common = argparse.ArgumentParser(add_help=False)
        self.pending: dict[str, str] = {}
        self.table: dict[str, Command] = {}

    def list_commands(self, common: argparse.ArgumentParser, table: dict[str, Command]) -> None:
        """A stand-in for every command, so that --help and a bad name read as if every module were loaded."""
        self.common, self.table = common, table
        for name, command in table.items():
            super().add_parser(name, help=command.help)
            self.pending[name] = command.module

    def add_parser(self, name: str, **kwargs: Any) -> argparse.ArgumentParser:
        """The module's own parser for `name`, taking the stand-in's place (and keeping the order of the listing)."""
        if name not in self.pending:
            return super().add_parser(name, **kwargs)
        del self.pending[name]
        order = list(self._name_parser_map)
        standin = next(i for i, a in enumerate(self._choices_actions) if a.dest == name)
        del self._name_parser_map[name]
        parser = super().add_parser(name, **kwargs)
        self._choices_actions[standin] = self._choices_actions.pop()
        self._name_parser_map = {n: self._name_parser_map[n] for n in order}
        self.choices = self._name_parser_map
        return parser

    def load(self, name: str) -> None:
        """Import the module that owns `name` and let it register its parser (a no-op once it has)."""
        module = self.pending.get(name)
        if module is not None:
            importlib.import_module(f"app.commands.{module}").register(self, self.common)
            if name in self.pending:
                raise RuntimeError(f"app.commands.{module} did not register the command {name!r}")

    def load_all(self) -> None:
        """Every command's real parser, for what walks the whole tree (documentation checks), groups' too."""
        for name in list(self.pending):
            self.load(name)
        for parser in self.choices.values():
            for action in parser._actions:
                if isinstance(action, LazyCommands):
                    action.load_all()

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: str | Sequence[Any] | None, option_string: str | None = None) -> None:
        if isinstance(values, list) and values:  # the command's name, then its own arguments
            self.load(str(values[0]))
        super().__call__(parser, namespace, values, option_string)


def add_commands(parser: argparse.ArgumentParser, common: argparse.ArgumentParser,
                 table: dict[str, Command] | None = None, dest: str = "command") -> LazyCommands:
    """Give parser every command of table (default COMMANDS; as `COMMAND`, required, its name in args.<dest>),
    none of their modules imported yet."""
    sub = parser.add_subparsers(dest=dest, metavar="COMMAND", required=True, action=LazyCommands)
    assert isinstance(sub, LazyCommands)
    sub.list_commands(common, COMMANDS if table is None else table)
    return sub


def help_paths(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every command path that prints a help (the top level, each group, each leaf) in listing order; parser built
    whole, not lazy, for benchmarks and checks that visit every command."""
    found = [path]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                found += help_paths(child, (*path, name))
    return found
