"""Exposition files: what is stored does not depend on the read chunk size, and a file that changes while being
read is one clear error with nothing stored."""

from __future__ import annotations

import functools
import gzip
import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.cli import main
from collectors.exceptions import CollectorError
from collectors.files import read_chunks
from collectors.pipeline import IngestOptions, ingest, make_context
from collectors.sources import ExpositionSource
from normalizers import Context
from store import Held, IngestRun, connect
from store.fleetrollups import FLEET_TABLES
from tests.conftest import REPO

NOW = 1_795_000_000.0
AT = 1_794_990_000_000
T1, T2 = AT - 30_000, AT - 15_000
HOST = 'Hostname="n1"'


def scrape(ts: int | None, g: int, memory: bool = False) -> list[str]:
    """One device's lines of a scrape, with a second, conflicting line of a gauge and of the XID code."""
    at = "" if ts is None else f" {ts}"
    labels = f'gpu="{g}",{HOST}'
    fb = [f"DCGM_FI_DEV_FB_USED{{{labels}}} 1000{at}", f"DCGM_FI_DEV_FB_FREE{{{labels}}} 2000{at}",
          f"DCGM_FI_DEV_FB_RESERVED{{{labels}}} 48{at}"] if memory else []
    return [
        f"DCGM_FI_DEV_GPU_UTIL{{{labels}}} {40 + g}{at}",
        *fb,
        f"DCGM_FI_DEV_XID_ERRORS{{{labels}}} {48 if g else 0}{at}",
        f"DCGM_FI_DEV_GPU_UTIL{{{labels}}} {50 + g}{at}",            # the same series and time: a duplicate
        f"DCGM_FI_DEV_XID_ERRORS{{{labels}}} {79 if g else 0}{at}",  # the same, with another code
    ]


# Scrapes out of time order (T2 before T1, then samples without a timestamp), comments, escapes, a bad line,
# CRLF line ends and samples after '# EOF'.
LINES = [
    "# TYPE DCGM_FI_DEV_GPU_UTIL gauge",
    *scrape(T2, 0, memory=True), *scrape(T2, 1),
    "# a comment between samples",
    *scrape(T1, 0), *scrape(T1, 1, memory=True),
    f'DCGM_FI_DEV_GPU_TEMP{{gpu="0",{HOST},modelName="H100 \\"SXM\\""}} 71 {T1}',
    "DCGM_FI_DEV_GPU_TEMP{gpu=0} 70",
    *scrape(None, 0),
    "# EOF",
    f"DCGM_FI_DEV_GPU_UTIL{{gpu=\"0\",{HOST}}} 9 {T2}",
]
TEXT = ("\r\n".join(LINES) + "\r\n").encode()
# every size up to 32 bytes (a boundary at each offset of a line, in many combinations), then a few larger
SIZES = [*range(1, 33), 47, 61, 64, 97, 128, 150, 199, 200, 997, 4096, 1 << 20]


OPTIONS = IngestOptions(pool="p", at_ms=AT)


def stored(con: duckdb.DuckDBPyConnection, source: ExpositionSource, context: Context) -> tuple[object, ...]:
    """Ingest, read back everything the run wrote inside its own transaction, then roll it back."""
    seen: list[tuple[object, ...]] = []

    class Seen(Exception):
        pass

    def look(c: duckdb.DuckDBPyConnection, run: IngestRun) -> None:
        rows = c.execute("SELECT ts, node, device, metric, value, attributes FROM samples ORDER BY ALL").fetchall()
        rejects = c.execute("SELECT line, record, reason FROM rejects ORDER BY ALL").fetchall()
        state = c.execute("SELECT * FROM error_state ORDER BY ALL").fetchall()
        seen.append((run.counts.as_dict(), rows, rejects, state))
        raise Seen

    with pytest.raises(Seen):
        ingest(Held(con), source, options=OPTIONS, clock=lambda: NOW, context=context, hooks=[look])
    assert con.execute("SELECT count(*) FROM samples").fetchall() == [(0,)]  # rolled back
    return seen[0]


@pytest.mark.slow  # ingests the file once per chunk size
def test_the_read_chunk_size_does_not_change_what_is_stored(con: duckdb.DuckDBPyConnection, tmp_path: Path) -> None:
    path = tmp_path / "x.prom"
    path.write_bytes(TEXT)
    context = make_context(Held(con), OPTIONS)  # profiles read once
    got = {size: stored(con, ExpositionSource("file", "x.prom", functools.partial(read_chunks, path, size)), context)
           for size in SIZES}
    counts, rows, rejects, state = got[1 << 20]
    # 29 sample lines. Stored: the first utilization of each of the 5 device scrapes, memory used and the total
    # (made of free and reserved too) twice, the temperature, and one XID event: 5 + 2 * 3 + 1 + 1 = 13.
    # Folded: the XID code of the other 4 device scrapes (0, or 48 again at T2). Rejected: the second
    # utilization and XID line of each device scrape, the bad line and the line after '# EOF'.
    assert counts == {"read": 29, "stored": 13, "rejected": 12, "duplicates": 4, "ignored": 0}
    assert len(rows) == 11
    dup = "duplicate series in one scrape: same series and timestamp as an earlier line"
    assert sorted(r[0] for r in rejects if r[2] == dup) == [7, 8, 11, 12, 16, 17, 23, 24, 29, 30]
    assert sorted(r[0] for r in rejects if r[2] != dup) == [26, 32]
    # XID 48 of gpu 1 is first seen at T1, which comes later in the file: one event there, folded at T2
    assert [r for r in rows if r[3] == "accelerator.errors"] == [
        (T1, "n1", "1", "accelerator.errors", 1.0,
         '{"code":"48","error_class":"memory_uncorrectable","severity":"fatal"}')]
    assert [(r[1], r[3], r[4]) for r in state] == [("0", T1, 0.0), ("1", T1, 48.0)]
    assert [size for size, result in got.items() if result != got[1 << 20]] == []


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
import collectors.files as files
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
files.read_chunks = chunks  # the command imports it from collectors.files when it runs
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
                for t in ("samples", "rejects", "versions", "error_state", "rollup_1m", "rollup_1h", "ingest_runs",
                          *FLEET_TABLES)}
    finally:
        con.close()


def test_out_of_order_input_that_cannot_be_read_again_is_one_error(con: duckdb.DuckDBPyConnection) -> None:
    cut = TEXT.index(b"\n", TEXT.index(str(T1).encode())) + 1  # after the first line at T1
    pieces = iter([TEXT[:cut], TEXT[cut:]])  # a one-shot iterator: the rest of T1 comes after T1 was given out
    with pytest.raises(CollectorError, match=r"^x.prom: timestamps go back in time \(a sample at "
                                             r"1794989970000 ms after one at 1794989970000 ms\); it cannot be read "
                                             r"again to take it in as one batch$"):
        ingest(Held(con), ExpositionSource("file", "x.prom", pieces), options=OPTIONS, clock=lambda: NOW)
    assert con.execute("SELECT count(*) FROM ingest_runs").fetchall() == [(0,)]


def test_a_last_line_older_than_what_went_before_is_taken_in_order(con: duckdb.DuckDBPyConnection) -> None:
    lines = [f'DCGM_FI_DEV_GPU_UTIL{{gpu="0",{HOST}}} {v} {ts}' for v, ts in ((40, T1), (41, T2), (42, AT))]
    text = "\n".join([*lines, lines[0].replace(" 40 ", " 50 ")]).encode()  # T1 again, without a final newline
    source = ExpositionSource("file", "x.prom", [text[:len(lines[0]) * 3 + 3], text[len(lines[0]) * 3 + 3:]])
    counts = ingest(Held(con), source, options=OPTIONS, clock=lambda: NOW).counts
    assert counts.as_dict() == {"read": 4, "stored": 3, "rejected": 1, "duplicates": 0, "ignored": 0}


def test_a_gz_that_inflates_past_its_cap_is_refused_with_the_reason(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from collectors import files
    from collectors.exceptions import CollectorError
    monkeypatch.setattr(files, "INFLATE_FLOOR_BYTES", 1 << 20)
    bomb = tmp_path / "bomb.prom.gz"
    bomb.write_bytes(gzip.compress(b"a 1\n" * (1 << 20), 9))  # 4 MiB, some 600 times its compressed size
    with pytest.raises(CollectorError, match=r"bomb\.prom\.gz' inflates to more than 1 MiB, 200 times its "
                                             r"compressed size: a \.gz this repetitive is refused"):
        b"".join(files.read_chunks(bomb, chunk_bytes=1 << 18))
    ordinary = tmp_path / "ok.prom.gz"
    body = b"".join(b'm{gpu="%d"} %d\n' % (i, i * 7919 % 1000) for i in range(50_000))
    ordinary.write_bytes(gzip.compress(body))
    assert b"".join(files.read_chunks(ordinary, chunk_bytes=1 << 18)) == body


@given(st.lists(st.binary(max_size=6).map(lambda b: b.replace(b"\n", b"")), max_size=60), st.integers(1, 7),
       st.booleans(), st.booleans())
def test_chunks_are_cut_to_at_most_max_lines_and_nothing_is_lost(lines: list[bytes], max_lines: int, tail: bool,
                                                                  as_view: bool) -> None:
    from collectors.sources import line_bounded
    data = b"".join(line + b"\n" for line in lines) + (b"no newline" if tail else b"")
    chunk = memoryview(data) if as_view else data
    pieces = [bytes(p) for p in line_bounded([chunk], max_lines)]
    assert b"".join(pieces) == data
    assert all(p.count(b"\n") <= max_lines for p in pieces)
    assert all(p.endswith(b"\n") for p in pieces[:-1])
