"""hetpool ingest ...: the command group every source adds its subcommand to."""

from __future__ import annotations

import argparse
from types import ModuleType

from app.commands import ingest_file, ingest_prometheus, ingest_traffic
from app.commands._base import add_group

# Each module exposes register(group, common) and adds one `hetpool ingest <source>` command.
SOURCES: tuple[ModuleType, ...] = (ingest_traffic, ingest_file, ingest_prometheus)


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """Add the ingest group and every source's subcommand."""
    group = add_group(sub, "ingest", help="bring metrics or traffic into the database")
    for module in SOURCES:
        module.register(group, common)
