"""Opening the DuckDB file: path resolution, migrations, transactions."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import duckdb

from store.errors import StoreError
from store.migrate import migrate

DEFAULT_DB = "hetpool.duckdb"
ENV_DB = "HETPOOL_DB"


def resolve_db_path(arg: str | None = None, env: Mapping[str, str] | None = None) -> Path:
    """--db wins, then $HETPOOL_DB, then ./hetpool.duckdb."""
    env = os.environ if env is None else env
    return Path(arg or env.get(ENV_DB) or DEFAULT_DB)


def connect(path: str | Path, *, read_only: bool = False) -> duckdb.DuckDBPyConnection:
    """Open the database; a writable open also brings the schema up to date."""
    p = Path(path)
    if read_only and not p.exists():
        raise StoreError(f"database {str(p)!r} does not exist; run 'hetpool init' or 'hetpool demo' first")
    if not read_only and p.parent and not p.parent.exists():
        raise StoreError(f"cannot create database {str(p)!r}: folder {str(p.parent)!r} does not exist")
    try:
        con = duckdb.connect(str(p), read_only=read_only)
    except duckdb.Error as exc:
        raise StoreError(f"cannot open database {str(p)!r}: {exc}") from exc
    if not read_only:
        try:
            migrate(con)
        except Exception:
            con.close()
            raise
    return con


@contextmanager
def transaction(con: duckdb.DuckDBPyConnection) -> Iterator[duckdb.DuckDBPyConnection]:
    """BEGIN ... COMMIT, or ROLLBACK on any exception so the store is left as it was."""
    con.execute("BEGIN TRANSACTION")
    try:
        yield con
    except BaseException:
        con.execute("ROLLBACK")
        raise
    con.execute("COMMIT")


def schema_version(con: duckdb.DuckDBPyConnection) -> int:
    """Highest applied migration."""
    row = fetch_one(con, "SELECT coalesce(max(version), 0) FROM schema_migrations")
    return int(row[0]) if row else 0


def fetch_one(con: duckdb.DuckDBPyConnection, sql: str, params: list[object] | None = None) -> tuple | None:
    """First row of a query, with the result fetched to the end so the connection is free again."""
    rows = con.execute(sql, params or []).fetchall()
    return rows[0] if rows else None
