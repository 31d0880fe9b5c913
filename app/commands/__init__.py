"""CLI command modules; each exposes register(subparsers, common)."""

from app.commands import console, ingest, init, prune, registry

MODULES = (init, registry, ingest, prune, console)
