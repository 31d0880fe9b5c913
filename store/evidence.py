"""Onboarding evidence files in `onboarding_evidence`: the newest file of each pool, item and role counts."""

from __future__ import annotations

import datetime as dt
import hashlib
from dataclasses import dataclass

import duckdb


@dataclass(frozen=True)
class StoredEvidence:
    """One stored evidence file with where it came from and when it was produced."""

    evidence_id: int
    pool: str
    item: str
    role: str
    name: str
    body: str
    produced_at: dt.datetime
    source: str


def add_evidence(con: duckdb.DuckDBPyConnection, *, pool: str, item: str, role: str, name: str, body: str,
                 produced_at: dt.datetime | None = None, source: str = "cli") -> tuple[int, bool]:
    """Store a file unless the newest one of its role is the same text from the same time; (id, created)."""
    sha = hashlib.sha256(body.encode()).hexdigest()
    now = dt.datetime.now(dt.UTC)
    produced = produced_at or now
    newest = con.execute("SELECT evidence_id, sha256, produced_at FROM onboarding_evidence WHERE pool = ? AND item = ? "
                         "AND role = ? ORDER BY evidence_id DESC LIMIT 1", [pool, item, role]).fetchall()
    if newest and newest[0][1] == sha and (produced_at is None or newest[0][2] == produced_at):
        return int(newest[0][0]), False
    row = con.execute("INSERT INTO onboarding_evidence (pool, item, role, name, sha256, body, produced_at, stored_at, "
                      "source) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING evidence_id",
                      [pool, item, role, name, sha, body, produced, now, source]).fetchall()
    return int(row[0][0]), True




def latest_evidence_of(con: duckdb.DuckDBPyConnection,
                       pools: tuple[str, ...]) -> dict[str, tuple[StoredEvidence, ...]]:
    """The newest file of every item and role of each pool, in one query."""
    rows = con.execute("""
        SELECT evidence_id, pool, item, role, name, body, produced_at, source FROM onboarding_evidence
        WHERE pool IN (SELECT unnest(?::VARCHAR[]))
        QUALIFY row_number() OVER (PARTITION BY pool, item, role ORDER BY evidence_id DESC) = 1
        ORDER BY pool, item, role""", [list(pools)]).fetchall()
    out: dict[str, list[StoredEvidence]] = {p: [] for p in pools}
    for r in rows:
        out[r[1]].append(StoredEvidence(int(r[0]), r[1], r[2], r[3], r[4], r[5], _utc(r[6]), r[7]))
    return {p: tuple(files) for p, files in out.items()}


def _utc(value: dt.datetime) -> dt.datetime:
    return value.astimezone(dt.UTC) if value.tzinfo else value.replace(tzinfo=dt.UTC)
