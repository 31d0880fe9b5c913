"""Registry snapshots: every loaded registry is kept, and the newest one is the fleet's truth."""

from __future__ import annotations

import datetime as dt
import hashlib
from dataclasses import dataclass

import duckdb

from pool_registry import Registry, registry_from_json, registry_to_json
from store.db import fetch_one
from store.exceptions import StoreError


@dataclass(frozen=True)
class Snapshot:
    """One stored registry with where and when it came from."""

    snapshot_id: int
    loaded_at: dt.datetime
    source: str
    sha256: str
    registry: Registry


def save_registry(con: duckdb.DuckDBPyConnection, registry: Registry, source: str) -> tuple[int, bool]:
    """Store a snapshot unless the newest one is identical; return (snapshot_id, created)."""
    body = registry_to_json(registry)
    digest = hashlib.sha256(body.encode()).hexdigest()
    newest = fetch_one(con, "SELECT snapshot_id, sha256 FROM registry_snapshots ORDER BY snapshot_id DESC LIMIT 1")
    if newest and newest[1] == digest:
        return int(newest[0]), False
    row = fetch_one(
        con,
        "INSERT INTO registry_snapshots (loaded_at, source, sha256, body) VALUES (?, ?, ?, ?) RETURNING snapshot_id",
        [dt.datetime.now(dt.UTC), source, digest, body],
    )
    assert row is not None
    return int(row[0]), True


def latest_registry(con: duckdb.DuckDBPyConnection) -> Snapshot | None:
    """The newest snapshot, or None when no registry was ever loaded."""
    row = fetch_one(
        con,
        "SELECT snapshot_id, loaded_at, source, sha256, body FROM registry_snapshots ORDER BY snapshot_id DESC LIMIT 1",
    )
    if row is None:
        return None
    return Snapshot(int(row[0]), row[1], row[2], row[3], registry_from_json(row[4], f"snapshot #{row[0]}"))


def require_registry(con: duckdb.DuckDBPyConnection) -> Registry:
    """The newest registry, or a StoreError telling the user how to load one."""
    snap = latest_registry(con)
    if snap is None:
        raise StoreError("no registry loaded; run 'hetpool registry load examples/fleet.yaml' first")
    return snap.registry
