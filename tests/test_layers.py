"""Each layer imports only what docs/architecture.md allows, pure layers stay pure, SQL stays in store/, and only
app/console imports streamlit."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.architecture import LAYERS, parse_layers
from tests.conftest import REPO

# What a pure layer may not import (docs/architecture.md, "Pure layers"): a database, the network, processes, a UI.
IMPURE = ("duckdb", "requests", "socket", "http", "urllib.request", "subprocess", "streamlit")
SQL_CALLS = {"execute", "executemany", "sql"}


def imports_of(path: Path) -> set[str]:
    """Top-level module names a file imports."""
    return {name.split(".")[0] for name in modules_of(path)}


def modules_of(path: Path) -> set[str]:
    """Full module names a file imports (`from a.b import c` gives a.b)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def impure_imports(path: Path) -> set[str]:
    """The modules a pure layer may not use that this file imports."""
    return {m for m in modules_of(path) for bad in IMPURE if m == bad or m.startswith(bad + ".")}


def sql_calls(path: Path) -> list[int]:
    """Lines that call execute, executemany or sql on something: SQL run from this file."""
    tree = ast.parse(path.read_text(), filename=str(path))
    return [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
            and n.func.attr in SQL_CALLS]


def layer_files(layer: str) -> list[Path]:
    return sorted((REPO / layer).rglob("*.py"))


@pytest.mark.parametrize("layer", LAYERS)
def test_layer_imports_follow_the_architecture(layer: str) -> None:
    files = layer_files(layer)
    assert files, f"layer {layer}/ has no modules"
    for path in files:
        used = imports_of(path) & set(LAYERS) - {layer}
        forbidden = used - LAYERS[layer].imports
        assert not forbidden, (f"{path.relative_to(REPO)} imports {sorted(forbidden)}, not allowed for {layer}/ "
                               "(docs/architecture.md)")
        if not path.is_relative_to(REPO / "app" / "console"):
            assert "streamlit" not in imports_of(path), f"{path.relative_to(REPO)} imports streamlit"


@pytest.mark.parametrize("layer", [name for name, layer in LAYERS.items() if layer.pure])
def test_pure_layers_open_no_database_network_or_process(layer: str) -> None:
    for path in layer_files(layer):
        assert not impure_imports(path), f"{path.relative_to(REPO)} of the pure layer {layer}/ imports " \
                                         f"{sorted(impure_imports(path))}"


@pytest.mark.parametrize("layer", sorted(set(LAYERS) - {"store"}))
def test_sql_is_run_only_in_store(layer: str) -> None:
    for path in layer_files(layer):
        assert not sql_calls(path), f"{path.relative_to(REPO)} runs SQL at lines {sql_calls(path)}; only store/ may"


def test_the_checkers_would_catch_a_violation(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("from store.db import connect\nimport app.cli\nimport urllib.request\nimport urllib.parse\n"
                   "con.execute('select 1')\n")
    assert imports_of(bad) == {"store", "app", "urllib"}
    assert impure_imports(bad) == {"urllib.request"}
    assert sql_calls(bad) == [5]
    assert "store" not in LAYERS["normalizers"].imports and "app" not in LAYERS["store"].imports
    assert LAYERS["status"].pure and not LAYERS["store"].pure


@pytest.mark.parametrize(("row", "message"), [
    ("| `store/` | x | `pool_registry/`, `kanonical/` | no |", "may import ['kanonical'], which are not layers"),
    ("| `store/` | x | the registry | no |", "'may import' must name layers, 'nothing' or 'every layer'"),
])
def test_a_table_that_names_no_real_layer_fails_helpfully(row: str, message: str) -> None:
    text = f"## Layers\n\n| layer | holds | may import | pure |\n|---|---|---|---|\n{row}\n" \
           "| `pool_registry/` | y | nothing | yes |\n"
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        parse_layers(text)

