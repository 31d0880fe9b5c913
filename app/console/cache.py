"""How the console reads the store: short reads, cached per database generation, waits shown on the page.

Every query is a plain function of a read-only connection and plain arguments (the database path first, the
window as numbers). It runs inside one cached function keyed by the query's name, the path, the database's
generation (its file identity and modification times, so a commit or a replaced file is seen at the next
rerun) and the arguments. A read waits at most READ_WAIT_S inside the cache; a longer wait comes back out
here, where the page says what it waits for until the database is free again. The queries themselves are in
data.py (and beside the pages that alone use them).
"""

from __future__ import annotations

import functools
import os
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

import streamlit as st

from store import ENV_DB, Store, StoreBusy, resolve_db_path
from store.locks import timeout_from_env

CACHE_TTL_S = 60
CACHE_ENTRIES = 1024
READ_WAIT_S = 0.8  # inside the cache, where nothing can be shown; longer waits are shown by read
T = TypeVar("T")
Generation = tuple[int, int, int, int, int] | None
_QUERIES: dict[str, Callable[..., Any]] = {}
_local = threading.local()


def db_path() -> str:
    """The database the console serves: $HETPOOL_DB, else Streamlit secrets, else ./hetpool.duckdb."""
    env = os.environ.get(ENV_DB)
    if env:
        return env
    try:
        secret = st.secrets.get("hetpool_db")
    except (FileNotFoundError, KeyError, st.errors.StreamlitSecretNotFoundError):
        secret = None
    return str(resolve_db_path(secret))


def generation(path: str) -> Generation:
    """The file's identity and last change (inode, size, mtime of the file and of its write-ahead log)."""
    try:
        st_db = os.stat(path)
    except OSError:
        return None
    try:
        st_wal = os.stat(path + ".wal")
        wal = (st_wal.st_size, st_wal.st_mtime_ns)
    except OSError:
        wal = (0, 0)
    return (st_db.st_ino, st_db.st_size, st_db.st_mtime_ns, *wal)


def show_waits_in(slot: Any) -> None:
    """Where this script run tells the user that the database is busy (an st.empty() of the page)."""
    _local.slot = slot


def say_waiting(message: str) -> None:
    """Tell the user, where this run shows waits, what the database is busy with."""
    slot = getattr(_local, "slot", None)
    if slot is not None:
        slot.info(message[:1].upper() + message[1:])


@st.cache_resource(show_spinner=False)
def _store(path: str) -> Store:
    return Store(path, timeout_s=READ_WAIT_S)


@st.cache_data(ttl=CACHE_TTL_S, max_entries=CACHE_ENTRIES, show_spinner=False)
def _cached(name: str, path: str, gen: Generation, args: tuple[Any, ...]) -> Any:
    with _store(path).read() as con:
        return _QUERIES[name](con, *args)


def _uncached(fn: Callable[..., Any], path: str, args: tuple[Any, ...]) -> Any:
    with _store(path).read() as con:
        return fn(con, *args)


def read(name: str | Callable[..., Any], path: str, args: tuple[Any, ...]) -> Any:
    """A query (cached when named, run as it is when a function); while the database is busy, say so on the page
    and try again."""
    started = time.monotonic()
    limit = timeout_from_env()
    slot = getattr(_local, "slot", None)
    while True:
        try:
            if isinstance(name, str):
                result = _cached(name, path, generation(path), args)
            else:
                result = _uncached(name, path, args)
        except StoreBusy:
            waited = time.monotonic() - started
            if waited >= limit:
                raise StoreBusy(f"the database stayed busy for {waited:.0f} s: {_store(path).gate.busy_with()}; "
                                "the page will try again when you reload it") from None
            if slot is not None:
                slot.info(f"Waiting for the database: {_store(path).gate.busy_with()}. This page goes on as soon "
                          f"as it is free ({waited:.0f} s so far).")
            time.sleep(0.2)
            continue
        if slot is not None and time.monotonic() - started > READ_WAIT_S:
            slot.empty()
        return result


def query(fn: Callable[..., T]) -> Callable[..., T]:
    """Make `fn(con, *args)` a cached console query called as `name(path, *args)`."""
    _QUERIES[fn.__name__] = fn

    @functools.wraps(fn)
    def call(path: str, *args: Any) -> T:
        return read(fn.__name__, path, args)

    return call
