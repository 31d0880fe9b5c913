"""Numbered schema migrations, recorded in the database so that re-running them is a no-op."""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from importlib import resources

import duckdb

from store.exceptions import MigrationError

_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")


@dataclass(frozen=True)
class Migration:
    """One numbered SQL script."""

    version: int
    name: str
    sql: str


def available() -> list[Migration]:
    """Migrations shipped with the package, in order."""
    found = []
    for entry in resources.files("store.migrations").iterdir():
        m = _NAME.match(entry.name)
        if m:
            found.append(Migration(int(m.group(1)), m.group(2), entry.read_text(encoding="utf-8")))
    found.sort(key=lambda m: m.version)
    versions = [m.version for m in found]
    # a number may be left free for a change numbered ahead of its merge; two files of one number are a mistake
    if len(set(versions)) != len(versions) or (versions and versions[0] < 1):
        raise MigrationError(f"migration numbers must be distinct and start at 1 or above, found {versions}")
    return found


def applied(con: duckdb.DuckDBPyConnection) -> list[int]:
    """Versions already recorded in this database."""
    con.execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations "
        "(version INTEGER PRIMARY KEY, name VARCHAR NOT NULL, applied_at TIMESTAMPTZ NOT NULL)"
    )
    return [r[0] for r in con.execute("SELECT version FROM schema_migrations ORDER BY version").fetchall()]


def migrate(con: duckdb.DuckDBPyConnection) -> list[int]:
    """Apply pending migrations, each in its own transaction; return the versions applied now."""
    done = set(applied(con))
    shipped = available()
    newest = max((m.version for m in shipped), default=0)
    if done and max(done) > newest:
        raise MigrationError(
            f"database schema version {max(done)} is newer than this hetpool ({newest}); upgrade hetpool"
        )
    ran = []
    for m in shipped:
        if m.version in done:
            continue
        con.execute("BEGIN TRANSACTION")
        try:
            con.execute(m.sql)
            con.execute(
                "INSERT INTO schema_migrations VALUES (?, ?, ?)",
                [m.version, m.name, dt.datetime.now(dt.UTC)],
            )
            con.execute("COMMIT")
        except duckdb.Error as exc:
            con.execute("ROLLBACK")
            raise MigrationError(f"migration {m.version:04d}_{m.name} failed: {exc}") from exc
        ran.append(m.version)
    return ran
