"""Other processes that hold a database: the gate's locks, or DuckDB's own lock, for as long as a test says."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.conftest import REPO

_SCRIPT = """
import sys, time
sys.path.insert(0, {repo!r})
from store.locks import Gate
import duckdb
db, mode, what = sys.argv[1], sys.argv[2], sys.argv[3]
gate = Gate(db)
if mode == "shared":
    ctx = gate.shared(what)
elif mode == "exclusive":
    ctx = gate.exclusive(what)
elif mode == "writer":
    ctx = gate.writer(what)
else:  # a process outside the gate holding DuckDB's own write lock
    con = duckdb.connect(db)
    ctx = None
if ctx is not None:
    ctx.__enter__()
print("held", flush=True)
sys.stdin.read()  # until the test closes our stdin
"""


@contextmanager
def holding(db: Path, mode: str, what: str = "a test holder") -> Iterator[subprocess.Popen[str]]:
    """A process that holds `db` in `mode` (shared, exclusive, writer or duckdb) until the block ends."""
    proc = subprocess.Popen([sys.executable, "-c", _SCRIPT.format(repo=str(REPO)), str(db), mode, what],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
        yield proc
    finally:
        if proc.stdin is not None:
            proc.stdin.close()
        proc.wait(timeout=20)
