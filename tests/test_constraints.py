"""constraints.txt pins every dependency pyproject.toml names, inside its range, and `make install` honours it."""

from __future__ import annotations

import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]


def _pins(text: str) -> dict[str, str]:
    pins: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        name, sep, version = line.partition("==")
        assert sep and version, f"constraints.txt:{number}: expected name==version, got {raw!r}"
        key = canonicalize_name(name)
        assert key not in pins, f"constraints.txt:{number}: {name!r} pinned twice"
        pins[key] = version.strip()
    return pins


def _requirements() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = list(project["dependencies"])
    for extra in project["optional-dependencies"].values():
        names.extend(extra)
    return [Requirement(n) for n in names]


PINS = _pins((ROOT / "constraints.txt").read_text())
REQUIREMENTS = _requirements()


@pytest.mark.parametrize("req", REQUIREMENTS, ids=str)
def test_each_dependency_is_pinned_inside_its_range(req: Requirement) -> None:
    key = canonicalize_name(req.name)
    assert key in PINS, f"{req.name} is in pyproject.toml but not pinned in constraints.txt: run `make lock`"
    assert req.specifier.contains(PINS[key], prereleases=True), (
        f"constraints.txt pins {req.name}=={PINS[key]}, outside pyproject.toml's {req.specifier}"
    )


@pytest.mark.parametrize("req", REQUIREMENTS, ids=str)
def test_the_installed_version_is_the_pinned_one(req: Requirement) -> None:
    assert metadata.version(req.name) == PINS[canonicalize_name(req.name)]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("polars>=1.20\n", "constraints.txt:1: expected name==version"),
        ("# header\nduckdb==2.0.1\nDuckDB==2.0.1\n", "constraints.txt:3: 'DuckDB' pinned twice"),
        ("numpy==\n", "constraints.txt:1: expected name==version"),
    ],
)
def test_a_malformed_line_is_named(text: str, message: str) -> None:
    with pytest.raises(AssertionError, match=message):
        _pins(text)
