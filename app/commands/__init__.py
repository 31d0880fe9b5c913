"""CLI command modules; each exposes register(subparsers, common)."""

from app.commands import (
    console,
    demo,
    export,
    ingest,
    init,
    onboarding,
    profile,
    prune,
    registry,
    replay,
    serve,
    versions,
)

MODULES = (init, registry, profile, ingest, export, prune, replay, versions, onboarding, demo, console, serve)
