"""The layer table of docs/architecture.md, read as the tests enforce it: the one place the layers are declared."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import REPO

DOC = REPO / "docs" / "architecture.md"
_ROW = re.compile(r"^\|\s*`(?P<name>[a-z_]+)/`\s*\|(?P<holds>[^|]+)\|(?P<imports>[^|]+)\|\s*(?P<pure>yes|no)\s*\|$")
_FOLDER = re.compile(r"^\|\s*`(?P<name>[a-z_]+)/`\s*\|(?P<holds>[^|]+)\|$")
_ROOM = re.compile(r"^\|(?P<title>[^|`]+)\|\s*`/(?P<url>[a-z_-]*)`\s*\|\s*`screens/(?P<screen>[a-z_]+)\.py`\s*\|$")


@dataclass(frozen=True)
class Layer:
    """One row of the layer table."""

    name: str
    holds: str
    imports: frozenset[str]  # the other layers it may import
    pure: bool


def _section(text: str, heading: str) -> list[str]:
    """The lines under `## heading`, up to the next heading of that level."""
    parts = re.split(r"^## ", text, flags=re.M)
    found = [p for p in parts if p.startswith(heading + "\n")]
    assert found, f"{DOC.relative_to(REPO)} has no '## {heading}' section"
    return found[0].splitlines()


def parse_layers(text: str) -> dict[str, Layer]:
    """The layer table: every row's layer with what it may import ('every layer' means all the others)."""
    rows = [m for line in _section(text, "Layers") if (m := _ROW.match(line.strip()))]
    names = [m["name"] for m in rows]
    layers = {}
    for m in rows:
        cell = m["imports"].strip()
        named = set(re.findall(r"`([a-z_]+)/`", cell))
        if cell == "every layer":
            named = set(names) - {m["name"]}
        elif cell != "nothing" and not named:
            raise ValueError(f"layer {m['name']}: 'may import' must name layers, 'nothing' or 'every layer', "
                             f"got {cell!r}")
        unknown = named - set(names)
        if unknown:
            raise ValueError(f"layer {m['name']} may import {sorted(unknown)}, which are not layers; known: "
                             f"{', '.join(names)}")
        layers[m["name"]] = Layer(m["name"], m["holds"].strip(), frozenset(named), m["pure"] == "yes")
    return layers


def parse_folders(text: str) -> dict[str, str]:
    """The folders beside the layers, with what each holds."""
    lines = _section(text, "Layers")
    return {m["name"]: m["holds"].strip() for line in lines if (m := _FOLDER.match(line.strip()))}


def parse_rooms(text: str) -> list[tuple[str, str, str]]:
    """The console's pages as the document lists them: (title, URL path, screen module)."""
    return [(m["title"].strip(), m["url"], m["screen"]) for line in _section(text, "The console's rooms")
            if (m := _ROOM.match(line.strip()))]


def read(path: Path = DOC) -> str:
    return path.read_text(encoding="utf-8")


LAYERS: dict[str, Layer] = parse_layers(read())
