"""Exposition files: what is stored does not depend on the read chunk size, and a file that changes while being
read is one clear error with nothing stored."""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.cli import main
from collectors.errors import CollectorError
from collectors.files import read_chunks
from store import connect
from tests.conftest import REPO

AT = 1_794_990_000_000
HOST = 'Hostname="n1"'


def lines_file(path: Path, n: int) -> bytes:
    """A time-ordered dcgm scrape file of n lines, about 60 bytes each."""
    text = "".join(f'DCGM_FI_DEV_GPU_UTIL{{gpu="{i % 8}",{HOST}}} {i % 100} {AT + (i // 8) * 15_000}\n'
                   for i in range(n)).encode()
    path.write_bytes(gzip.compress(text) if path.suffix == ".gz" else text)
    return path.read_bytes()


def truncate(path: Path) -> None:
    os.truncate(path, 1000)


def grow(path: Path) -> None:
    with path.open("ab") as f:
        f.write(b"DCGM_FI_DEV_GPU_UTIL 1\n")


def replace_file(path: Path) -> None:
    other = path.with_name("other" + path.suffix)
    other.write_bytes(path.read_bytes())
    os.replace(other, path)


def rewrite(path: Path) -> None:
    data = path.read_bytes()
    with path.open("r+b") as f:  # the same size, other bytes, a later modification time
        f.write(data[:10].upper())
    st = os.stat(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))


CHANGES = [  # (file name, what happens while the first chunk is held, what the error says)
    ("x.prom", truncate, "(size 60900 -> 1000)"),
    ("x.prom", grow, "(size 60900 -> 60923)"),
    ("x.prom", replace_file, "(replaced by another file)"),
    ("x.prom", rewrite, "(rewritten in place)"),
    ("x.prom", os.remove, "(removed)"),
    ("x.prom.gz", truncate, "(size "),
    ("x.prom.gz", replace_file, "(replaced by another file)"),
]


@pytest.mark.parametrize(("name", "change", "said"), CHANGES, ids=[f"{c[0]}-{c[1].__name__}" for c in CHANGES])
def test_a_file_that_changes_while_read_is_an_error(tmp_path: Path, name: str, change: object, said: str) -> None:
    path = tmp_path / name
    lines_file(path, 1000)
    assert callable(change)
    with pytest.raises(CollectorError) as info:
        for n, _ in enumerate(read_chunks(path, 4096)):
            if n == 0:  # while the first chunk is held, before the next is read
                change(path)
    assert str(info.value).startswith(f"file {str(path)!r} changed while being read ")
    assert said in str(info.value)


def test_an_unchanged_file_reads_whole_in_any_chunk_size(tmp_path: Path) -> None:
    path = tmp_path / "x.prom"
    data = lines_file(path, 1000)
    for size in (7, 4096, 60_000, 1 << 20):
        chunks = list(read_chunks(path, size))
        assert b"".join(chunks) == data and max(map(len, chunks)) == min(size, len(data))
    small = lines_file(tmp_path / "small.prom", 20)
    assert list(read_chunks(tmp_path / "small.prom", 1)) == [small[i:i + 1] for i in range(len(small))]
    assert b"".join(read_chunks(tmp_path / "x.prom")) == data
    gz = tmp_path / "x.prom.gz"
    lines_file(gz, 1000)
    assert b"".join(read_chunks(gz, 999)) == data


# `hetpool ingest file` in a process of its own, reading in 64 KiB chunks; the file is changed as argv[1] says
# once the first chunk is read, before the parser gets it. With the file memory-mapped, the truncation killed
# the process with SIGBUS as the parser read the chunk's pages.
CLI = """
import os, sys
from pathlib import Path
import app.commands.ingest_file as command
from app.cli import main
from collectors.files import read_chunks
how, path = sys.argv[1], Path(sys.argv[-1])
def chunks(p):
    for n, chunk in enumerate(read_chunks(p, 1 << 16)):
        if n == 0 and how == "truncate":
            os.truncate(path, 1000)
        elif n == 0:
            other = path.with_name("other.prom")
            other.write_bytes(b"DCGM_FI_DEV_GPU_UTIL 1\\n")
            os.replace(other, path)
        yield chunk
command.read_chunks = chunks
sys.exit(main(sys.argv[2:]))
"""


@pytest.mark.parametrize(("how", "said"), [("truncate", "(size 609000 -> 1000)"),
                                           ("replace", "(replaced by another file)")])
def test_ingest_of_a_file_changed_while_read_exits_2_and_stores_nothing(fleet_db: Path, tmp_path: Path,
                                                                        how: str, said: str) -> None:
    path = tmp_path / "x.prom"
    lines_file(path, 10_000)
    assert path.stat().st_size == 609_000  # ten 64 KiB chunks
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    first = tmp_path / "first.prom"
    lines_file(first, 16)
    args = ["--db", str(fleet_db), "ingest", "file", "--pool", "h100-a"]
    assert main([*args, str(first)]) == 0
    before = tables(fleet_db)
    done = subprocess.run([sys.executable, "-c", CLI, how, *args, str(path)], env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [f"hetpool: error: file {str(path)!r} changed while being read {said}"]
    assert tables(fleet_db) == before


def tables(db: Path) -> dict[str, list[tuple[object, ...]]]:
    """Every table an ingest writes, as plain rows."""
    con = connect(db, read_only=True)
    try:
        return {t: sorted(con.execute(f"SELECT * FROM {t}").fetchall(), key=repr)
                for t in ("samples", "rejects", "versions", "error_state", "rollup_1m", "rollup_1h", "ingest_runs")}
    finally:
        con.close()
