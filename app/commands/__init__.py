"""CLI command modules; each exposes register(subparsers, common)."""

from app.commands import console, demo, export, ingest, init, prune, registry, replay

MODULES = (init, registry, ingest, export, prune, replay, demo, console)
