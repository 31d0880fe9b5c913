"""CLI command modules; each exposes register(subparsers, common)."""

from app.commands import console, ingest, init, prune, registry, replay

MODULES = (init, registry, ingest, prune, replay, console)
