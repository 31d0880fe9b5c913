"""Store: every read or write opens the file under the gate and closes it again; nesting and foreign locks."""

from __future__ import annotations

import threading
from pathlib import Path

import duckdb
import pytest

from store import Store, StoreBusy, StoreError, connect
from store.db import default_memory_limit, engine_config
from tests.holders import holding


def made(db: Path) -> Store:
    connect(db).close()
    return Store(db, timeout_s=5)


def test_a_read_of_a_missing_database_says_how_to_make_one(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match=r"does not exist; run 'hetpool init' or 'hetpool demo' first"), \
            Store(tmp_path / "none.duckdb").read():
        pass


def test_an_old_schema_is_refused_for_reading_with_the_command_that_upgrades_it(tmp_path: Path) -> None:
    db = tmp_path / "old.duckdb"
    con = connect(db)
    con.execute("DELETE FROM schema_migrations WHERE version > 1")
    con.close()
    with pytest.raises(StoreError, match=r"lacks schema migration 2 \(it is at version 1\), this hetpool needs "
                                         r"\d+; run 'hetpool init' to upgrade it"), \
            Store(db).read():
        pass


def test_a_duckdb_file_that_is_not_hetpools_is_named(tmp_path: Path) -> None:
    db = tmp_path / "other.duckdb"
    duckdb.connect(str(db)).close()
    with pytest.raises(StoreError, match="is not a hetpool database"), Store(db).read():
        pass


def test_nested_access_reuses_the_connection_and_a_write_cannot_nest_in_a_read(tmp_path: Path) -> None:
    store = made(tmp_path / "x.duckdb")
    with store.read() as outer, store.read() as inner:
        assert outer is inner
    with store.write("w") as outer, store.read() as inner:
        assert outer is inner
    with store.read(), pytest.raises(StoreError, match="a write cannot start inside a read"), store.write("w"):
        pass


def test_the_file_is_closed_between_accesses(tmp_path: Path) -> None:
    db = tmp_path / "x.duckdb"
    store = made(db)
    with store.transaction("t") as con:
        con.execute("CREATE TABLE t (x INTEGER)")
        con.execute("INSERT INTO t VALUES (1)")
    other = duckdb.connect(str(db))  # only possible when no connection of the store stays open
    assert other.execute("SELECT x FROM t").fetchall() == [(1,)]
    other.close()


def test_a_lock_held_outside_the_gate_is_waited_out_then_named(tmp_path: Path) -> None:
    db = tmp_path / "x.duckdb"
    made(db)
    told: list[str] = []
    with holding(db, "duckdb") as proc:
        store = Store(db, timeout_s=1.5, on_wait=told.append)
        with pytest.raises(StoreBusy, match=rf"stayed locked .* by python .*\(pid {proc.pid}\), which does not use "
                                            "hetpool's lock"), store.read():
            pass
    assert len(told) == 1 and f"(pid {proc.pid}) holds it" in told[0]
    with store.read() as con:  # released: a read goes through
        assert con.execute("SELECT 1").fetchall() == [(1,)]


def test_writes_of_many_threads_of_one_process_are_serialized(tmp_path: Path) -> None:
    store = made(tmp_path / "x.duckdb")
    with store.transaction("t") as con:
        con.execute("CREATE TABLE t (thread INTEGER, i INTEGER)")
    errors: list[BaseException] = []

    def work(n: int) -> None:
        try:
            for i in range(15):
                with store.transaction(f"thread {n}") as con:
                    con.execute("INSERT INTO t VALUES (?, ?)", [n, i])
                with store.read() as con:
                    con.execute("SELECT count(*) FROM t").fetchall()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    with store.read() as con:
        assert con.execute("SELECT count(*), count(DISTINCT (thread, i)) FROM t").fetchall() == [(60, 60)]


GIB = 1 << 30


@pytest.mark.parametrize(("physical", "limit"), [
    (64 * GIB, "2048MiB"),   # a quarter would be 16 GiB: capped
    (4 * GIB, "1024MiB"),    # a quarter
    (GIB // 2, "256MiB"),    # a quarter would be 128 MiB: the floor
])
def test_the_default_memory_limit_is_a_quarter_within_floor_and_cap(physical: int, limit: str) -> None:
    assert default_memory_limit(physical) == limit
    assert engine_config({}, physical) == {"memory_limit": limit}
    assert engine_config({"HETPOOL_DUCKDB_MEMORY_LIMIT": " 5GB ", "HETPOOL_DUCKDB_THREADS": "1"}, physical) == {
        "memory_limit": "5GB", "threads": "1"}


def memory_limit(db: Path) -> str:
    with Store(db).read() as con:
        return str(con.execute("SELECT current_setting('memory_limit')").fetchall()[0][0])


def test_every_open_applies_the_default_memory_limit_or_the_environments(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    import store.db

    db = tmp_path / "m.duckdb"
    connect(db).close()
    monkeypatch.delenv("HETPOOL_DUCKDB_MEMORY_LIMIT", raising=False)
    monkeypatch.setattr(store.db, "physical_memory", lambda: 4 * GIB)
    assert memory_limit(db) == "1.0 GiB"
    monkeypatch.setenv("HETPOOL_DUCKDB_MEMORY_LIMIT", "3GiB")
    assert memory_limit(db) == "3.0 GiB"


@pytest.mark.parametrize("value", ["4GB", " 512MiB ", "1.5gb", "4 GB", "4G", "2TiB", "25%", "100%"])
def test_memory_limits_duckdb_takes_are_passed_on(value: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert engine_config({"HETPOOL_DUCKDB_MEMORY_LIMIT": value})["memory_limit"] == value.strip()
    monkeypatch.setenv("HETPOOL_DUCKDB_MEMORY_LIMIT", value)
    connect(tmp_path / "ok.duckdb").close()  # and DuckDB takes them


@pytest.mark.parametrize(("var", "value", "expected"), [
    ("HETPOOL_DUCKDB_MEMORY_LIMIT", "lots", "a memory size"),
    ("HETPOOL_DUCKDB_MEMORY_LIMIT", "4", "a memory size"),        # DuckDB: "unknown unit", not which setting
    ("HETPOOL_DUCKDB_MEMORY_LIMIT", "-1GB", "a memory size"),     # DuckDB would take it as no limit at all
    ("HETPOOL_DUCKDB_MEMORY_LIMIT", "0GB", "a memory size"),
    ("HETPOOL_DUCKDB_MEMORY_LIMIT", "4Gi", "a memory size"),
    ("HETPOOL_DUCKDB_MEMORY_LIMIT", "150%", "a memory size"),
    ("HETPOOL_DUCKDB_THREADS", "0", "a whole number of threads"),
    ("HETPOOL_DUCKDB_THREADS", "two", "a whole number of threads"),
])
def test_a_bad_setting_names_its_variable_and_value(var: str, value: str, expected: str, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(StoreError, match=f"^{var}={value!r} is not {expected}"):
        engine_config({var: value})
    monkeypatch.setenv(var, value)
    with pytest.raises(StoreError, match=f"^{var}={value!r} is not {expected}"):
        connect(tmp_path / "bad.duckdb")
    assert not (tmp_path / "bad.duckdb").exists()  # refused before DuckDB made the file
