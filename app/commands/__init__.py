"""CLI command modules; each exposes register(subparsers, common)."""

from app.commands import console, ingest, init, registry

MODULES = (init, registry, ingest, console)
