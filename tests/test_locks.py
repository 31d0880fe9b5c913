"""The gate beside a database file: shared readers, one writer, a turnstile, bounded waits that say why."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from store import StoreBusy, StoreError
from store.locks import Gate, WaitStats, lock_pids, process_name, read_holder, sidecar, timeout_from_env
from tests.holders import holding


def fast(db: Path, timeout_s: float = 0.5, **kw: object) -> Gate:
    return Gate(db, timeout_s=timeout_s, **kw)  # type: ignore[arg-type]


def test_readers_share_and_a_writer_is_alone(tmp_path: Path) -> None:
    db = tmp_path / "x.duckdb"
    with holding(db, "shared"):
        with fast(db).shared():  # a second reader gets in at once
            pass
        with pytest.raises(StoreBusy, match="stayed busy"), fast(db).exclusive("hetpool test write"):
            pass
    writing = r"hetpool ingest file big\.prom \(pid \d+\) has been writing for"
    with holding(db, "exclusive", "hetpool ingest file big.prom"), pytest.raises(StoreBusy, match=writing), \
            fast(db).shared():
        pass
    with fast(db).exclusive("now free"):
        assert read_holder(db) is not None and read_holder(db).what == "now free"  # type: ignore[union-attr]
    assert read_holder(db) is None  # cleared on release, so no stale holder is ever named


def test_a_waiting_writer_goes_before_new_readers(tmp_path: Path) -> None:
    db = tmp_path / "x.duckdb"
    order: list[str] = []
    first = Gate(db, timeout_s=10)
    with first.shared():
        writer = threading.Thread(target=lambda: _take(Gate(db, timeout_s=10).exclusive("w"), order, "writer"))
        writer.start()
        time.sleep(0.3)  # the writer now holds the turnstile and waits for this reader
        late = threading.Thread(target=lambda: _take(Gate(db, timeout_s=10).shared(), order, "late reader"))
        late.start()
        time.sleep(0.3)
        assert order == []  # the late reader queues behind the writer instead of joining this read
    writer.join(5)
    late.join(5)
    assert order == ["writer", "late reader"]


def _take(cm: object, order: list[str], name: str) -> None:
    with cm:  # type: ignore[attr-defined]
        order.append(name)
        time.sleep(0.1)


def test_a_wait_is_told_once_after_a_second(tmp_path: Path) -> None:
    db = tmp_path / "x.duckdb"
    told: list[str] = []
    with holding(db, "exclusive", "hetpool prune"):
        gate = Gate(db, timeout_s=1.5, on_wait=told.append)
        with pytest.raises(StoreBusy), gate.shared():
            pass
    assert len(told) == 1 and "waiting for the database" in told[0] and "hetpool prune (pid" in told[0]
    with Gate(db, timeout_s=1, on_wait=told.append).shared():  # no wait: nothing told
        pass
    assert len(told) == 1


def test_a_replace_is_refused_while_another_process_writes(tmp_path: Path) -> None:
    db = tmp_path / "x.duckdb"
    with holding(db, "writer", "collector") as proc:
        assert proc.pid in lock_pids(sidecar(db, ".writers"))
        refused = rf"refusing to replace .*x\.duckdb'.*\(pid {proc.pid}\) is writing"
        with pytest.raises(StoreBusy, match=refused), fast(db).sole_writer("replace"):
            pass
    with fast(db).sole_writer("replace"):
        pass


def test_process_names_are_short_and_say_what_runs() -> None:
    import os

    assert process_name(os.getpid()).endswith(f"(pid {os.getpid()})")
    assert process_name(2**22 + 12345) == f"pid {2**22 + 12345}"


@pytest.mark.parametrize(("text", "expected"), [("", 60.0), ("2.5", 2.5), (" 30 ", 30.0)])
def test_the_wait_limit_comes_from_the_environment(text: str, expected: float) -> None:
    assert timeout_from_env({"HETPOOL_LOCK_TIMEOUT": text}) == expected


@pytest.mark.parametrize("text", ["0", "-1", "soon", "nan"])
def test_a_bad_wait_limit_is_one_clear_error(text: str) -> None:
    with pytest.raises(StoreError, match=rf"HETPOOL_LOCK_TIMEOUT='{text}': expected a number of seconds"):
        timeout_from_env({"HETPOOL_LOCK_TIMEOUT": text})


def test_wait_stats_count_only_real_waits() -> None:
    stats = WaitStats()
    for s in (0.0, 0.005, 0.3, 1.2):
        stats.add(s)
    assert (stats.accesses, stats.waits, stats.worst_s) == (4, 2, 1.2)
    assert stats.line() == "4 database accesses, 2 waited; longest wait 1.20 s, 1.50 s in all"
