"""CLI command modules; each exposes register(subparsers, common)."""

from app.commands import console, init, registry

MODULES = (init, registry, console)
