"""Opening the DuckDB file: path resolution, migrations, transactions, and short gated access (`Store`)."""

from __future__ import annotations

import contextlib
import os
import re
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Protocol

import duckdb

from store.exceptions import MigrationError, StoreBusy, StoreError
from store.locks import Gate, WaitHook, process_name
from store.migrate import available, migrate

DEFAULT_DB = "hetpool.duckdb"
ENV_DB = "HETPOOL_DB"
# DuckDB settings from the environment, applied at every open: name of the variable -> DuckDB option
ENV_SETTINGS = {"HETPOOL_DUCKDB_MEMORY_LIMIT": "memory_limit", "HETPOOL_DUCKDB_THREADS": "threads"}


MIB = 1 << 20
# Without $HETPOOL_DUCKDB_MEMORY_LIMIT, DuckDB may use a quarter of the memory, at most this much (and at least
# MEMORY_FLOOR): DuckDB's own default of 80 % is per process, and the console, collectors and commands are
# several processes on one machine. Larger work spills to DuckDB's temporary files instead.
MEMORY_CAP = 2048 * MIB
MEMORY_FLOOR = 256 * MIB


def physical_memory() -> int:
    """Bytes of memory this process may use: the machine's, or the container's limit when that is lower."""
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    try:
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
    except OSError:
        return total
    return min(total, int(limit)) if limit.isdigit() else total


def default_memory_limit(physical: int | None = None) -> str:
    """DuckDB's memory_limit when the environment sets none: a quarter of `physical`, within floor and cap."""
    total = physical_memory() if physical is None else physical
    return f"{max(MEMORY_FLOOR, min(total // 4, MEMORY_CAP)) // MIB}MiB"


# what DuckDB takes as a memory size; checked here because DuckDB takes "-1GB" as no limit at all, and its
# parser's message for "4" or "lots" does not say which setting it was
_MEMORY = re.compile(r"(\d+(?:\.\d+)?) ?([KMGT](?:i?B)?|%)", re.IGNORECASE)


def _memory_size(value: str) -> bool:
    size = _MEMORY.fullmatch(value)
    return size is not None and float(size[1]) > 0 and (size[2] != "%" or float(size[1]) <= 100)


_CHECKS: dict[str, tuple[Callable[[str], bool], str]] = {
    "memory_limit": (_memory_size, "a memory size such as 4GB, 512MiB or 25%"),
    "threads": (lambda v: v.isdigit() and int(v) >= 1, "a whole number of threads, at least 1")}


def engine_config(env: Mapping[str, str] | None = None,
                  physical: int | None = None) -> dict[str, str | bool | int | float | list[str]]:
    """DuckDB options: those set in the environment ($HETPOOL_DUCKDB_MEMORY_LIMIT=4GB, $HETPOOL_DUCKDB_THREADS=1),
    and the default memory limit when it sets none. A value DuckDB would refuse, or take as no limit, is a
    StoreError naming the variable and the value."""
    env = os.environ if env is None else env
    config: dict[str, str | bool | int | float | list[str]] = {}
    for var, option in ENV_SETTINGS.items():
        value = env.get(var, "").strip()
        if not value:
            continue
        valid, expected = _CHECKS[option]
        if not valid(value):
            raise StoreError(f"{var}={env[var]!r} is not {expected}")
        config[option] = value
    config.setdefault("memory_limit", default_memory_limit(physical))
    return config


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
    config = engine_config()
    try:
        con = duckdb.connect(str(p), read_only=read_only, config=config)
    except duckdb.InvalidInputException as exc:
        named = ", ".join(f"{v}={os.environ[v]!r}" for v in ENV_SETTINGS if os.environ.get(v, "").strip())
        raise StoreError(f"cannot open database {str(p)!r}: a DuckDB setting is not valid ({named}): {exc}") from exc
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
    except BaseException as exc:
        with contextlib.suppress(duckdb.Error):  # a failed commit has ended the transaction already
            con.execute("ROLLBACK")
        if isinstance(exc, duckdb.IOException) or _DISK.search(str(exc)):
            raise StoreError(f"cannot write the database: {_io_reason(exc)}; nothing of this was stored") from None
        raise
    try:
        con.execute("COMMIT")
    except duckdb.Error as exc:
        with contextlib.suppress(duckdb.Error):
            con.execute("ROLLBACK")
        raise StoreError(f"cannot commit to the database: {_io_reason(exc)}; nothing of this was stored") from None


# what a full disk or a file-size limit says, whichever DuckDB exception carries it
_DISK = re.compile(r"No space left on device|File too large|Disk quota exceeded|Read-only file system", re.I)


def _io_reason(exc: BaseException) -> str:
    """The operating system's words in a DuckDB I/O error (disk full, file too large), else its first line."""
    found = _DISK.search(str(exc))
    if found:
        return found.group().lower()
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def schema_version(con: duckdb.DuckDBPyConnection) -> int:
    """Highest applied migration."""
    row = fetch_one(con, "SELECT coalesce(max(version), 0) FROM schema_migrations")
    return int(row[0]) if row else 0


def fetch_one(con: duckdb.DuckDBPyConnection, sql: str, params: list[object] | None = None) -> tuple | None:
    """First row of a query, with the result fetched to the end so the connection is free again."""
    rows = con.execute(sql, params or []).fetchall()
    return rows[0] if rows else None


class Access(Protocol):
    """How the layers above reach the database: a read, or a write, each as short as it can be."""

    def read(self) -> AbstractContextManager[duckdb.DuckDBPyConnection]:
        """A connection to read from, for the duration of the block."""
        ...

    def write(self, what: str) -> AbstractContextManager[duckdb.DuckDBPyConnection]:
        """A writable connection for the duration of the block; `what` names the writer to waiters."""
        ...

    def writing(self, what: str) -> AbstractContextManager[None]:
        """Announce that this process writes, for as long as the block runs (staging included)."""
        ...


_LOCKED = re.compile(r"lock|different configuration", re.IGNORECASE)
_PID = re.compile(r"PID (\d+)")


class Store:
    """A database file shared with other processes: every read or write opens it, works, and closes it again.

    Opening costs a few tens of milliseconds; in exchange no process keeps others out for longer than one
    read or one commit. A thread that is inside a read or write and asks again gets the same connection.
    """

    def __init__(self, path: str | Path, *, timeout_s: float | None = None, on_wait: WaitHook | None = None):
        self.path = Path(path)
        self.gate = Gate(self.path, timeout_s=timeout_s, on_wait=on_wait)
        self._local = threading.local()

    def exists(self) -> bool:
        """Whether the database file is there."""
        return self.path.exists()

    def ensure(self, what: str) -> Store:
        """Create the database (with its schema) if it is not there yet, as a writing command expects."""
        if not self.path.exists():
            with self.write(what):
                pass
        return self

    @contextmanager
    def read(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A read-only connection under the shared lock."""
        held = getattr(self._local, "con", None)
        if held is not None:
            yield held
            return
        if not self.path.exists():
            raise StoreError(f"database {str(self.path)!r} does not exist; run 'hetpool init' or 'hetpool demo' first")
        with self.gate.shared():
            con = self._open(read_only=True)
            yield from self._lend(con, writable=False)

    @contextmanager
    def write(self, what: str) -> Iterator[duckdb.DuckDBPyConnection]:
        """A writable connection (schema brought up to date) under the exclusive lock."""
        held = getattr(self._local, "con", None)
        if held is not None:
            if not self._local.writable:
                raise StoreError(f"{what}: a write cannot start inside a read of the same database")
            yield held
            return
        with self.gate.writer(what), self.gate.exclusive(what):
            con = self._open(read_only=False)
            yield from self._lend(con, writable=True)

    def writing(self, what: str) -> AbstractContextManager[None]:
        """Announce a writer for the block, so the file is not replaced under it."""
        return self.gate.writer(what)

    @contextmanager
    def transaction(self, what: str) -> Iterator[duckdb.DuckDBPyConnection]:
        """A write inside one transaction: committed at the end of the block, rolled back on any exception."""
        with self.write(what) as con, transaction(con):
            yield con

    def _lend(self, con: duckdb.DuckDBPyConnection, *, writable: bool) -> Iterator[duckdb.DuckDBPyConnection]:
        self._local.con, self._local.writable = con, writable
        try:
            yield con
        finally:
            self._local.con = None
            con.close()

    def _open(self, *, read_only: bool) -> duckdb.DuckDBPyConnection:
        """Open the file; a lock held by a process outside the gate is waited out like any other."""
        wait_started = self.gate.clock()
        told = False
        while True:
            try:
                con = connect(self.path, read_only=read_only)
                break
            except StoreError as exc:
                cause = exc.__cause__
                if not isinstance(cause, duckdb.Error) or not _LOCKED.search(str(cause)):
                    raise
                pid = _PID.search(str(cause))
                who = process_name(int(pid.group(1))) if pid else "another process"
                waited = self.gate.clock() - wait_started
                if waited >= self.gate.timeout_s:
                    raise StoreBusy(f"database {str(self.path)!r} stayed locked for {waited:.0f} s by {who}, "
                                     "which does not use hetpool's lock; stop it, or try again") from None
                if not told and waited >= 1.0 and self.gate.on_wait is not None:
                    told = True
                    self.gate.on_wait(f"waiting for the database {str(self.path)!r}: {who} holds it")
                self.gate.sleep(0.05)
        if read_only:
            try:
                _check_schema(con, self.path)
            except BaseException:
                con.close()
                raise
        return con


class Held:
    """An already open, private connection used as a store (a file being built, a test's database)."""

    def __init__(self, con: duckdb.DuckDBPyConnection):
        self.con = con

    @contextmanager
    def read(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """The connection itself."""
        yield self.con

    @contextmanager
    def write(self, what: str) -> Iterator[duckdb.DuckDBPyConnection]:
        """The connection itself."""
        yield self.con

    @contextmanager
    def writing(self, what: str) -> Iterator[None]:
        """Nothing to announce: nobody else uses this connection."""
        yield


def _check_schema(con: duckdb.DuckDBPyConnection, path: Path) -> None:
    """A read-only open cannot migrate: say what to run instead of failing on a missing column later."""
    try:
        done = {int(r[0]) for r in con.execute("SELECT version FROM schema_migrations").fetchall()}
    except duckdb.CatalogException:
        raise StoreError(f"{str(path)!r} is not a hetpool database (no schema_migrations table)") from None
    shipped = [m.version for m in available()]
    have, newest = max(done, default=0), max(shipped, default=0)
    if have > newest:
        raise MigrationError(f"database schema version {have} is newer than this hetpool ({newest}); upgrade hetpool")
    missing = [v for v in shipped if v not in done]
    if missing:
        raise StoreError(f"database {str(path)!r} lacks schema migration {missing[0]} (it is at version {have}), "
                         f"this hetpool needs {newest}; run 'hetpool init' to upgrade it")
