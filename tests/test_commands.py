"""The command table: every command listed without importing it, its module loaded only when it runs."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from typing import Any

import pytest

from app.cli import build_parser
from app.commands import COMMANDS, Command, LazyCommands, _choices, help_paths
from tests.conftest import REPO


def commands_of(parser: argparse.ArgumentParser) -> LazyCommands:
    return next(a for a in parser._actions if isinstance(a, LazyCommands))


def in_fresh_python(code: str) -> list[str]:
    """Run code in a new interpreter; it prints a JSON list, returned here."""
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120,
                          check=True)
    return list(json.loads(done.stdout.strip().splitlines()[-1]))


def lazy_sets(parser: argparse.ArgumentParser, path: str = "hetpool") -> dict[str, LazyCommands]:
    """Every lazily listed set of subcommands in the tree, by the command path it belongs to."""
    found: dict[str, LazyCommands] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            if isinstance(action, LazyCommands):
                found[path] = action
            for name, child in action.choices.items():
                found.update(lazy_sets(child, f"{path} {name}"))
    return found


def test_the_table_lists_every_command_with_the_help_its_module_gives() -> None:
    full = commands_of(build_parser())
    assert full.pending == {}
    listed = {a.dest: a.help for a in full._choices_actions}
    assert list(listed) == list(COMMANDS), "a module registered a command the table does not name"
    for name, command in COMMANDS.items():
        assert listed[name] == command.help, (f"app/commands/{command.module}.py gives '{name}' other help than "
                                              "COMMANDS in app/commands/__init__.py")


def test_every_group_table_lists_its_commands_with_the_help_their_modules_give() -> None:
    sets = lazy_sets(build_parser())
    assert set(sets) == {"hetpool", "hetpool ingest"}
    for path, lazy in sets.items():
        assert lazy.pending == {}
        listed = {a.dest: a.help for a in lazy._choices_actions}
        assert list(listed) == list(lazy.table), f"a module registered a command under {path} its table lacks"
        for name, command in lazy.table.items():
            assert listed[name] == command.help, (f"app/commands/{command.module}.py gives '{path} {name}' other "
                                                  "help than its table")


def test_a_group_builds_only_the_parser_of_the_source_named() -> None:
    parser = build_parser(lazy=True)
    args = parser.parse_args(["ingest", "traffic", "trace.csv", "--format", "azure"])
    assert (args.command, args.ingest_command, args.path, args.format) == ("ingest", "traffic", "trace.csv", "azure")
    ingest = lazy_sets(parser)["hetpool ingest"]
    assert set(ingest.pending) == {"file", "scrape", "prometheus"}
    assert list(ingest.choices) == ["traffic", "file", "scrape", "prometheus"]


def test_a_bad_source_name_lists_them_all(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        build_parser(lazy=True).parse_args(["ingest", "bogus"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("hetpool ingest: error: argument COMMAND: invalid choice: 'bogus'")
    assert all(f"'{name}'" in err for name in ("traffic", "file", "scrape", "prometheus"))


# What the parsers show in place of a layer's names; each must be that layer's value.
def test_the_parsers_names_are_the_layers() -> None:
    from app.serve import feed
    from collectors import promhttp
    from replay.bench import ARRIVALS, RANGE_STYLES
    from replay.planner import DEFAULT_CONCURRENCY
    from replay.sweep import EXECUTORS
    from store.exports import FORMATS as EXPORT_FORMATS
    from store.exports import RESOLUTIONS
    from traces import DEFAULT_START, FORMATS

    assert tuple(sorted(FORMATS)) == _choices.TRACE_FORMATS
    assert DEFAULT_START.isoformat() == _choices.TRACE_START
    assert _choices.SWEEP_EXECUTORS == EXECUTORS
    assert (_choices.BENCH_ARRIVALS, _choices.BENCH_RANGE_STYLES) == (ARRIVALS, RANGE_STYLES)
    assert _choices.PLAN_CONCURRENCY == DEFAULT_CONCURRENCY
    assert (_choices.EXPORT_FORMATS, _choices.EXPORT_RESOLUTIONS) == (EXPORT_FORMATS, RESOLUTIONS)
    assert (_choices.PROM_ENV_TOKEN, _choices.PROM_ENV_USER, _choices.PROM_ENV_PASSWORD) == (
        promhttp.ENV_TOKEN, promhttp.ENV_USER, promhttp.ENV_PASSWORD)
    assert (_choices.FEED_ENV_TOKEN, _choices.FEED_WINDOW_MS, _choices.FEED_MAX_SERIES, _choices.FEED_REFRESH_S) == (
        feed.ENV_TOKEN, feed.DEFAULT_WINDOW_MS, feed.DEFAULT_MAX_SERIES, feed.DEFAULT_REFRESH_S)


def test_help_reads_the_same_whether_the_modules_are_loaded_or_not() -> None:
    assert build_parser(lazy=True).format_help() == build_parser().format_help()


def test_a_command_builds_only_its_own_parser() -> None:
    parser = build_parser(lazy=True)
    args = parser.parse_args(["--db", "x.duckdb", "registry", "validate", "fleet.yaml"])
    assert (args.command, args.registry_command, args.file, args.db) == ("registry", "validate", "fleet.yaml",
                                                                        "x.duckdb")
    assert "registry" not in commands_of(parser).pending and "replay" in commands_of(parser).pending
    assert list(commands_of(parser).choices) == list(COMMANDS)  # the order of the listing is kept


def test_a_bad_command_name_lists_them_all(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        build_parser(lazy=True).parse_args(["bogus"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "invalid choice: 'bogus'" in err and all(f"'{name}'" in err for name in COMMANDS)


def test_a_module_that_does_not_register_its_name_fails_helpfully(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(COMMANDS, "bogus", Command("init", "registered nowhere"))
    with pytest.raises(RuntimeError, match=r"app\.commands\.init did not register the command 'bogus'"):
        build_parser(lazy=True).parse_args(["bogus"])


HEAVY = {"duckdb", "polars", "streamlit", "scipy", "numpy", "requests", "yaml", "prometheus_client",
         "prometheus_api_client", "replay", "store", "onboarding", "normalizers", "collectors", "status", "access",
         "pool_registry"}


def help_cases() -> list[Any]:
    return [pytest.param(path, id=" ".join(path) or "hetpool") for path in help_paths(build_parser())]


@pytest.mark.parametrize("path", help_cases())
def test_importing_the_cli_and_printing_help_load_no_layer(path: tuple[str, ...]) -> None:
    loaded = in_fresh_python(
        "import contextlib, io, json, sys\n"
        "from app.cli import main\n"
        "out = io.StringIO()\n"
        "with contextlib.suppress(SystemExit), contextlib.redirect_stdout(out):\n"
        f"    main({[*path, '--help']!r})\n"
        "assert out.getvalue().startswith('usage: hetpool'), out.getvalue()\n"
        f"print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in {sorted(HEAVY)!r})))")
    assert loaded == []


def test_a_command_imports_its_own_module_and_not_the_others() -> None:
    loaded = in_fresh_python(
        "import json, sys\n"
        "from app.cli import build_parser\n"
        "build_parser(lazy=True).parse_args(['init'])\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('app.commands.'))))")
    assert "app.commands.init" in loaded
    assert not {f"app.commands.{c.module}" for c in COMMANDS.values()} - {"app.commands.init"} & set(loaded)
