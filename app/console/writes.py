"""The console's writes, each one short transaction a lead may make: a replay run kept, evidence files added, a
capacity runway stored."""

from __future__ import annotations

from typing import Any

from access import Decision, require
from app.console.cache import say_waiting
from onboarding.files import EvidenceFile, store_files
from store import Store, replay_runs
from store.runways import save_runway as store_runway


def save_run(path: str, record: dict[str, Any], user: Decision | None) -> int:
    """Save a replay in one short write (the replay itself ran before, holding nothing); returns its run id.
    Refused with AccessDenied, before the store is opened, unless the user is a lead."""
    require(user, "save_replay_run")
    store = Store(path, on_wait=say_waiting)
    with store.transaction("hetpool console: save a replay run") as con:
        return replay_runs.save_replay_run(con, **record)


def add_evidence(path: str, files: tuple[EvidenceFile, ...], user: Decision | None) -> int:
    """Store checked onboarding evidence files in one short write; how many were new. Refused with AccessDenied,
    before the store is opened, unless the user is a lead."""
    require(user, "add_evidence")
    store = Store(path, on_wait=say_waiting)
    pools = ", ".join(sorted({f.pool for f in files}))
    with store.transaction(f"hetpool console: add onboarding evidence to {pools}") as con:
        return store_files(con, files, "console")


def save_runway(path: str, computed_ms: int, rows: list[dict[str, Any]], user: Decision | None) -> int:
    """Store a computed runway (app.runway_job.rows) in one short write, for Fleet health and the runway alert;
    how many pools. Refused with AccessDenied, before the store is opened, unless the user is a lead."""
    require(user, "save_runway")
    store = Store(path, on_wait=say_waiting)
    with store.transaction("hetpool console: store a capacity runway") as con:
        return store_runway(con, computed_ms, rows)
