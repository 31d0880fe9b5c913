"""Swapping a newly built database file into place, so nobody ever reads or writes half a build.

The new file is built beside the target under a private name and renamed over it in one step, under the
exclusive lock and only while no other process is writing. Readers that open the path afterwards get the new
file; an interrupted build leaves the old one exactly as it was.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import duckdb

from store.db import Store, connect, fetch_one
from store.exceptions import StoreError

_BUILDING = ".building-"


MAIN_TABLES = ("samples", "rejects", "versions", "requests", "replay_runs", "registry_snapshots")


def table_counts(con: duckdb.DuckDBPyConnection) -> dict[str, int]:
    """Row counts of the main tables, to say what a replaced database held."""
    out = {}
    for table in MAIN_TABLES:
        row = fetch_one(con, f"SELECT count(*) FROM {table}")  # table names are constants
        out[table] = int(row[0]) if row else 0
    return out


def building_path(target: Path) -> Path:
    """Where a build for `target` is written: a hidden name beside it, unique to this process."""
    return target.with_name(f".{target.name}{_BUILDING}{os.getpid()}")


def discard(path: Path) -> None:
    """Remove a build that was not swapped in, with its write-ahead log."""
    for leftover in (path, path.with_name(path.name + ".wal")):
        leftover.unlink(missing_ok=True)


def remove_stale(target: Path) -> list[Path]:
    """Remove builds for `target` whose process is gone (killed before it could clean up); returns them."""
    gone = []
    for path in sorted(target.parent.glob(f".{target.name}{_BUILDING}*")):
        build = path.with_name(path.name.removesuffix(".wal"))  # a log can outlive its file
        pid = build.name.rsplit("-", 1)[-1]
        if pid.isdigit() and not _alive(int(pid)) and build not in gone:
            discard(build)
            gone.append(build)
    return gone


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def refuse_held_data(store: Store, *, under_lock: bool = False) -> None:
    """Refuse to replace a database that holds samples or requests (StoreError naming what it holds)."""
    if not store.exists():
        return
    try:
        if under_lock:  # the caller holds the exclusive lock: open directly instead of queueing behind itself
            con = connect(store.path, read_only=True)
            try:
                counts = table_counts(con)
            finally:
                con.close()
        else:
            with store.read() as con:
                counts = table_counts(con)
    except StoreError as exc:
        raise StoreError(f"{str(store.path)!r} exists and cannot be read as a hetpool database ({exc}); "
                         "build into a new file, or pass --replace to overwrite it") from None
    if counts["samples"] or counts["requests"]:
        raise StoreError(f"database {str(store.path)!r} already holds {counts['samples']:,} samples and "
                         f"{counts['requests']:,} requests; build into a new file, or pass --replace to start "
                         "this one over")


def replace_database(store: Store, built: Path, *, keep_data: bool, what: str) -> None:
    """Rename `built` over the store's file, unless another process writes to it (or, with keep_data, it
    holds data). The old write-ahead log goes with the old file, so the new file never replays it."""
    with store.gate.sole_writer("replace"), store.gate.exclusive(what):
        if keep_data:
            refuse_held_data(store, under_lock=True)
        with contextlib.suppress(FileNotFoundError):
            store.path.with_name(store.path.name + ".wal").unlink()
        os.replace(built, store.path)
