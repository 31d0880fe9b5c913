"""Each layer imports only what DESIGN.md allows, and only app/console imports streamlit."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import REPO

LAYERS = ("access", "app", "collectors", "normalizers", "onboarding", "replay", "status", "pool_registry", "store",
          "canonical")
ALLOWED = {
    "canonical": set(),
    "access": {"pool_registry", "canonical"},  # pure: who may do what, from a roles file
    "pool_registry": set(),
    "store": {"pool_registry", "canonical"},
    "normalizers": {"pool_registry", "canonical"},
    "collectors": {"normalizers", "store", "pool_registry", "canonical"},
    "replay": {"store", "pool_registry", "canonical"},
    "status": {"pool_registry", "canonical"},  # pure: the store's frames come in through app/
    "onboarding": {"replay", "store", "pool_registry", "canonical"},
    "app": set(LAYERS),
}


def imports_of(path: Path) -> set[str]:
    """Top-level module names a file imports."""
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def layer_files(layer: str) -> list[Path]:
    return sorted((REPO / layer).rglob("*.py"))


@pytest.mark.parametrize("layer", LAYERS)
def test_layer_imports_follow_the_design(layer: str) -> None:
    files = layer_files(layer)
    assert files, f"layer {layer}/ has no modules"
    for path in files:
        used = imports_of(path) & set(LAYERS) - {layer}
        forbidden = used - ALLOWED[layer]
        assert not forbidden, f"{path.relative_to(REPO)} imports {sorted(forbidden)}, not allowed for {layer}/"
        if not path.is_relative_to(REPO / "app" / "console"):
            assert "streamlit" not in imports_of(path), f"{path.relative_to(REPO)} imports streamlit"


def test_the_checker_would_catch_a_violation(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("from store.db import connect\nimport app.cli\n")
    assert imports_of(bad) == {"store", "app"}
    assert "store" not in ALLOWED["normalizers"]
