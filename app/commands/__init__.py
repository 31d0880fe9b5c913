"""CLI command modules; each exposes register(subparsers, common)."""

from app.commands import console, demo, export, ingest, init, profile, prune, registry, replay, serve

MODULES = (init, registry, profile, ingest, export, prune, replay, demo, console, serve)
