"""Numbered migrations are recorded and re-running them changes nothing."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from store import MigrationError, StoreError, connect, schema_version
from store.migrate import available, migrate


def test_migrations_run_once_and_are_recorded(db_path: Path) -> None:
    con = connect(db_path)
    shipped = [m.version for m in available()]
    rows = con.execute("SELECT version, name FROM schema_migrations ORDER BY version").fetchall()
    assert [r[0] for r in rows] == shipped
    assert rows[0][1] == "init"
    assert migrate(con) == []  # second run: nothing pending
    tables = {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
    con.close()
    con = connect(db_path)  # reopening migrates again: still nothing to do
    assert schema_version(con) == shipped[-1]
    assert con.execute("SELECT count(*) FROM schema_migrations").fetchone() == (len(shipped),)
    assert {"samples", "rejects", "ingest_runs", "versions", "requests", "replay_runs",
            "registry_snapshots"} <= tables
    con.close()


def test_database_newer_than_code_is_refused(db_path: Path) -> None:
    con = connect(db_path)
    con.execute("INSERT INTO schema_migrations VALUES (999, 'future', now())")
    with pytest.raises(MigrationError, match="schema version 999 is newer"):
        migrate(con)
    con.close()


def test_read_only_open_of_missing_file_says_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="does not exist; run 'hetpool init'"):
        connect(tmp_path / "absent.duckdb", read_only=True)


def test_missing_folder_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match=r"folder .* does not exist"):
        connect(tmp_path / "no" / "such" / "x.duckdb")


def test_not_a_database_is_a_clear_error(tmp_path: Path) -> None:
    bogus = tmp_path / "bogus.duckdb"
    bogus.write_text("this is not a database\n" * 100)
    with pytest.raises(StoreError, match="cannot open database"):
        connect(bogus)
    assert isinstance(StoreError("x"), Exception) and not isinstance(StoreError("x"), duckdb.Error)
