"""The command table: every command listed without importing it, its module loaded only when it runs."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

import pytest

from app.cli import build_parser
from app.commands import COMMANDS, Command, LazyCommands
from tests.conftest import REPO


def commands_of(parser: argparse.ArgumentParser) -> LazyCommands:
    return next(a for a in parser._actions if isinstance(a, LazyCommands))


def in_fresh_python(code: str) -> list[str]:
    """Run code in a new interpreter; it prints a JSON list, returned here."""
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120,
                          check=True)
    return list(json.loads(done.stdout.strip().splitlines()[-1]))


def test_the_table_lists_every_command_with_the_help_its_module_gives() -> None:
    full = commands_of(build_parser())
    assert full.pending == {}
    listed = {a.dest: a.help for a in full._choices_actions}
    assert list(listed) == list(COMMANDS), "a module registered a command the table does not name"
    for name, command in COMMANDS.items():
        assert listed[name] == command.help, (f"app/commands/{command.module}.py gives '{name}' other help than "
                                              "COMMANDS in app/commands/__init__.py")


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


HEAVY = {"duckdb", "polars", "streamlit", "scipy", "numpy", "requests", "replay", "store", "onboarding", "normalizers",
         "collectors", "status", "pool_registry"}


# The commands whose modules import their layers in their handlers; the others load theirs to print --help.
@pytest.mark.parametrize("argv", [["--help"], ["init", "--help"], ["prune", "--help"],
                                  ["profile", "validate", "--help"], ["registry", "load", "--help"]], ids=" ".join)
def test_importing_the_cli_and_printing_help_load_no_layer(argv: list[str]) -> None:
    loaded = in_fresh_python(
        "import contextlib, io, json, sys\n"
        "from app.cli import main\n"
        "with contextlib.suppress(SystemExit), contextlib.redirect_stdout(io.StringIO()):\n"
        f"    main({argv!r})\n"
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
