"""A demo build never breaks what runs on the database: it is built beside the file and swapped in whole."""

from __future__ import annotations

import hashlib
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from app.cli import main
from store import Store, StoreBusy, StoreError
from store.replace import building_path, discard, refuse_held_data, remove_stale, replace_database
from tests.conftest import REPO
from tests.holders import holding

pytestmark = pytest.mark.slow  # builds demos and interrupts them

SMALL = ("--days", "0.1", "--devices-per-pool", "1", "--end", "2026-11-29T08:00:00Z")
LONGER = ("--days", "1", "--devices-per-pool", "4", "--end", "2026-11-29T08:00:00Z")


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def leftovers(db: Path) -> list[str]:
    return sorted(p.name for p in db.parent.glob(f".{db.name}.building-*") if p.suffix != ".wal")


@pytest.fixture
def built(tmp_path: Path, demo_db: Path) -> Path:
    copy = tmp_path / "demo.duckdb"
    copy.write_bytes(demo_db.read_bytes())
    return copy


def start_build(db: Path) -> subprocess.Popen[str]:
    """`hetpool demo --replace` in a process of its own, returned once its progress shows it is building."""
    proc = subprocess.Popen([sys.executable, "-m", "app.cli", "--db", str(db), "demo", "--replace", *LONGER],
                            cwd=REPO, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    assert proc.stderr is not None
    for line in proc.stderr:
        done = re.search(r"\]\s+(\d+)%", line)
        if done and int(done.group(1)) >= 10:  # a tenth of the build is done, and a file is being written
            return proc
    raise AssertionError(f"the build ended before it showed progress (exit {proc.wait()})")


@pytest.mark.parametrize("how", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupted_build_leaves_the_previous_database_byte_identical(built: Path, how: int) -> None:
    before = sha(built)
    proc = start_build(built)
    proc.send_signal(how)
    assert proc.wait(timeout=60) in (130, 143) or proc.returncode < 0
    assert sha(built) == before
    assert leftovers(built) == []  # the half-built file went with the interrupted build


def test_a_killed_build_leaves_the_database_and_its_leftover_is_removed_next_time(built: Path) -> None:
    before = sha(built)
    proc = start_build(built)
    proc.kill()
    proc.wait(timeout=30)
    assert sha(built) == before
    assert leftovers(built) == [f".{built.name}.building-{proc.pid}"]
    assert [p.name for p in remove_stale(built)] == [f".{built.name}.building-{proc.pid}"]
    assert list(built.parent.glob(f".{built.name}.building-*")) == []  # its write-ahead log went with it


def test_replace_is_refused_while_another_process_writes(built: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = sha(built)
    with holding(built, "writer", "hetpool serve") as proc:
        assert main(["--db", str(built), "demo", "--replace", *SMALL]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "refusing to replace" in err and f"(pid {proc.pid}) is writing to it" in err
    assert sha(built) == before and leftovers(built) == []


def test_a_store_opened_before_the_swap_reads_the_new_file(built: Path) -> None:
    store = Store(built)
    with store.read() as con:
        nodes_before = con.execute("SELECT count(DISTINCT node) FROM samples").fetchall()[0][0]
    inode = os.stat(built).st_ino
    assert main(["--db", str(built), "demo", "--replace", *SMALL]) == 0
    assert os.stat(built).st_ino != inode
    with store.read() as con:
        assert con.execute("SELECT count(DISTINCT node) FROM samples").fetchall()[0][0] == 6 != nodes_before


def test_the_swap_keeps_data_it_was_not_told_to_replace(built: Path, tmp_path: Path) -> None:
    other = tmp_path / "new.duckdb"
    other.write_bytes(b"not even a database")
    store = Store(built)
    with pytest.raises(StoreError, match=r"already holds [\d,]+ samples and [\d,]+ requests"):
        refuse_held_data(store)
    with pytest.raises(StoreError, match="already holds"):
        replace_database(store, other, keep_data=True, what="test")
    assert other.exists()
    with holding(built, "writer"), pytest.raises(StoreBusy, match="is writing to it"):
        replace_database(store, other, keep_data=False, what="test")
    replace_database(store, other, keep_data=False, what="test")
    assert built.read_bytes() == b"not even a database"


def test_build_paths_are_hidden_beside_the_target_and_discarded_with_their_log(tmp_path: Path) -> None:
    target = tmp_path / "hetpool.duckdb"
    path = building_path(target)
    assert path.parent == tmp_path and path.name == f".hetpool.duckdb.building-{os.getpid()}"
    path.write_text("x")
    path.with_name(path.name + ".wal").write_text("y")
    assert remove_stale(target) == []  # this process is alive: its build is not stale
    discard(path)
    assert list(tmp_path.iterdir()) == []
