"""CLI command modules; each exposes register(subparsers, common)."""

from app.commands import (
    alerts,
    check,
    console,
    demo,
    export,
    feed,
    ingest,
    init,
    onboarding,
    profile,
    prune,
    registry,
    replay,
    rules,
    serve,
    versions,
)

MODULES = (init, registry, profile, check, ingest, export, prune, replay, versions, alerts, onboarding, demo, console,
           serve, feed, rules)
