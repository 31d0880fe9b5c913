"""Shared parts of the fuzz sweep (tests/test_fuzz_*.py): seeds, byte mutations, reproducible settings.

Every input is a seed (an examples/ file, a corpus file, or a small document written here) with a few
mutations applied: truncation at any byte, flipped bytes, NUL and non-UTF-8 bytes, CRLF line ends, lines
repeated, dropped or swapped, and long runs of one character. Hypothesis derandomizes, so CI runs the same
cases every time; `HETPOOL_FUZZ_SCALE` multiplies every case count (0.1 for a quick look, 10 for a long hunt).
`HETPOOL_FUZZ=sweep` (`make fuzz`, a stage of CI after the suite) runs each test's sweep count instead: the counts
of one ingest path's tests add up to at least 10,000 (tests/test_fuzz_counts.py checks the sums).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from tests.conftest import REPO, corpus_dir

T = TypeVar("T")
SCALE_ENV = "HETPOOL_FUZZ_SCALE"
MODE_ENV = "HETPOOL_FUZZ"
SWEEP_MIN_PER_PATH = 10_000
# Per ingest path, the sweep count of each of its tests: the slow whole-store cases get fewer, the pure
# parsing cases most (tests/test_fuzz_counts.py checks each path reaches SWEEP_MIN_PER_PATH).
SWEEP: dict[str, dict[str, int]] = {}


def cases(n: int, *, path: str, sweep: int) -> Callable[[T], T]:
    """Run a property over n derandomized cases (scaled by $HETPOOL_FUZZ_SCALE), or over `sweep` cases when
    $HETPOOL_FUZZ=sweep; `path` names the ingest path whose sweep counts must reach SWEEP_MIN_PER_PATH."""
    base = sweep if os.environ.get(MODE_ENV, "") == "sweep" else n
    scale = float(os.environ.get(SCALE_ENV, "1") or 1)
    chosen = settings(max_examples=max(1, int(base * scale)), deadline=None, derandomize=True, database=None,
                      suppress_health_check=list(HealthCheck), print_blob=True)

    def apply(test: T) -> T:
        SWEEP.setdefault(path, {})[getattr(test, "__name__", repr(test))] = sweep
        return chosen(test)
    return apply


def repo_files(*patterns: str) -> list[bytes]:
    """Contents of files of the repository matching glob patterns (relative to the checkout)."""
    return [p.read_bytes() for pattern in patterns for p in sorted(REPO.glob(pattern)) if p.is_file()]


def corpus_files(*patterns: str, limit: int = 64 << 10) -> list[bytes]:
    """Heads of corpus files matching glob patterns; none when the corpus is not there."""
    root = corpus_dir()
    if not root.is_dir():
        return []
    return [p.read_bytes()[:limit] for pattern in patterns for p in sorted(root.glob(pattern)) if p.is_file()]


def _truncate(data: bytes, at: int, _b: bytes) -> bytes:
    return data[:at]


def _flip(data: bytes, at: int, b: bytes) -> bytes:
    if not data:
        return data
    i = at % len(data)
    return data[:i] + bytes([data[i] ^ ((b[0] | 1) if b else 0x20)]) + data[i + 1:]


def _insert(data: bytes, at: int, b: bytes) -> bytes:
    return data[:at] + b + data[at:]


def _nul(data: bytes, at: int, _b: bytes) -> bytes:
    return data[:at] + b"\x00" + data[at:]


def _not_utf8(data: bytes, at: int, b: bytes) -> bytes:
    return data[:at] + (b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xe2\x82")[at % 4] + data[at:]


def _delete(data: bytes, at: int, b: bytes) -> bytes:
    return data[:at] + data[at + 1 + len(b):]


def _crlf(data: bytes, _at: int, _b: bytes) -> bytes:
    return data.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n")


def _lines(data: bytes) -> list[bytes]:
    return data.splitlines(keepends=True) or [b""]


def _repeat_line(data: bytes, at: int, _b: bytes) -> bytes:
    lines = _lines(data)
    i = at % len(lines)
    return b"".join([*lines[:i + 1], lines[i], *lines[i + 1:]])


def _drop_line(data: bytes, at: int, _b: bytes) -> bytes:
    lines = _lines(data)
    i = at % len(lines)
    return b"".join(lines[:i] + lines[i + 1:])


def _swap_lines(data: bytes, at: int, b: bytes) -> bytes:
    lines = _lines(data)
    i, j = at % len(lines), (at + 1 + (b[0] if b else 0)) % len(lines)
    lines[i], lines[j] = lines[j], lines[i]
    return b"".join(lines)


def _long_run(data: bytes, at: int, b: bytes) -> bytes:
    return data[:at] + (b[:1] or b"x") * (1000 + 50 * at % 5000) + data[at:]


def _number(data: bytes, at: int, b: bytes) -> bytes:
    """Replace the number nearest `at` with an extreme one."""
    found = list(re.finditer(rb"-?\d+(?:\.\d+)?", data))
    if not found:
        return data
    m = found[at % len(found)]
    extreme = (b"0", b"-1", b"1e308", b"-1e400", b"NaN", b"9223372036854775808", b"1e-320", b"+Inf",
               b"0x10", b"1_000", b"99999999999999999999")[(b[0] if b else at) % 11]
    return data[:m.start()] + extreme + data[m.end():]


MUTATIONS: list[Callable[[bytes, int, bytes], bytes]] = [
    _truncate, _flip, _insert, _nul, _not_utf8, _delete, _crlf, _repeat_line, _drop_line, _swap_lines, _long_run,
    _number]


def mutate(data: bytes, ops: list[tuple[int, int, bytes]]) -> bytes:
    """Apply (mutation, position, bytes) steps; positions wrap around the data's length."""
    for op, at, b in ops:
        data = MUTATIONS[op % len(MUTATIONS)](data, at % (len(data) + 1), b)
    return data


def mutated(seeds: list[bytes], steps: int = 3) -> st.SearchStrategy[bytes]:
    """A seed with up to `steps` mutations."""
    assert seeds, "no seed"
    op = st.tuples(st.integers(0, len(MUTATIONS) - 1), st.integers(0, 1 << 20), st.binary(max_size=6))
    return st.builds(mutate, st.sampled_from(seeds), st.lists(op, max_size=steps))


def text_of(data: bytes) -> str:
    """Bytes as a loader that takes text would get them from a file read with errors replaced."""
    return data.decode("utf-8", "replace")


def write(tmp: Path, name: str, data: bytes) -> Path:
    """Write data to tmp/name and return the path."""
    path = tmp / name
    path.write_bytes(data)
    return path
