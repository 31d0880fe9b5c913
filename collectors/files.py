"""Exposition files read in bounded chunks, so a file larger than memory streams through.

A plain file is read with `os.pread`, one chunk at a time, into a bytes object of its own: the parser's
batches point into their chunk rather than copy it, so a chunk is never reused. The file is not memory-mapped:
a mapped file truncated by another process while its pages are read kills the reader with SIGBUS, which
Python cannot catch. A .gz file is decompressed chunk by chunk.

Between chunks the file is checked against what it was when it was opened (size, inode, modification time):
a file truncated, grown, rewritten or replaced while being read is an error naming the change, and since an
ingest commits only at its end, nothing of it is stored.
"""

from __future__ import annotations

import gzip
import os
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import NoReturn

from collectors.exceptions import CollectorError

# Larger chunks mean fewer batches, each with a fixed cost in every stage, but more memory held per batch:
# 48 MiB measured fastest within the 1 GiB peak RSS target.
CHUNK_BYTES = 48 << 20
# Exposition text compresses about 10 to 30 times; a .gz past both of these is a bomb, not a scrape
INFLATE_RATIO = 200
INFLATE_FLOOR_BYTES = 256 << 20


def _open(p: Path) -> int:
    try:
        if p.is_dir():
            raise CollectorError(f"{str(p)!r} is a directory; expected an exposition file")
        return os.open(p, os.O_RDONLY)
    except FileNotFoundError:
        raise CollectorError(f"file {str(p)!r} not found") from None
    except PermissionError:
        raise CollectorError(f"file {str(p)!r} is not readable (permission denied)") from None


class _Watch:
    """What the file was when opened; `check` raises when it is no longer that file, unchanged."""

    def __init__(self, p: Path, fd: int):
        self.p = p
        self.fd = fd
        self.opened = os.fstat(fd)

    def check(self) -> None:
        """Raise CollectorError naming the change, if the file changed since it was opened."""
        now = os.fstat(self.fd)
        was = self.opened
        if now.st_size != was.st_size:
            self.changed(f"size {was.st_size} -> {now.st_size}")
        try:
            at_path = os.stat(self.p)
        except OSError:
            self.changed("removed")
        if (at_path.st_ino, at_path.st_dev) != (was.st_ino, was.st_dev):
            self.changed("replaced by another file")
        if now.st_mtime_ns != was.st_mtime_ns:
            self.changed("rewritten in place")

    def changed(self, how: str) -> NoReturn:
        """Raise the error of a file that changed while being read."""
        raise CollectorError(f"file {str(self.p)!r} changed while being read ({how})")


def read_chunks(path: str | Path, chunk_bytes: int = CHUNK_BYTES) -> Iterator[bytes]:
    """Yield the file's bytes chunk by chunk, each chunk a bytes object of its own; the file is checked for
    changes after every read and once more at its end."""
    if chunk_bytes < 1:
        raise ValueError(f"chunk_bytes must be at least 1, got {chunk_bytes}")
    p = Path(path)
    fd = _open(p)
    try:
        watch = _Watch(p, fd)
        if p.suffix == ".gz":
            yield from _gzip_chunks(p, fd, chunk_bytes, watch)
            return
        size = watch.opened.st_size
        for offset in range(0, size, chunk_bytes):
            want = min(chunk_bytes, size - offset)
            try:
                data = os.pread(fd, want, offset)
            except OSError as exc:
                raise CollectorError(f"cannot read {str(p)!r}: {exc}") from None
            if len(data) < want:  # the file ends early: it shrank since it was opened
                watch.check()
                watch.changed(f"size {size} -> {os.fstat(fd).st_size}")
            watch.check()
            yield data
        watch.check()
    finally:
        os.close(fd)


def inflate_cap(compressed_bytes: int) -> int:
    """How large a .gz of this size may inflate to before it is refused as a bomb."""
    return max(INFLATE_FLOOR_BYTES, INFLATE_RATIO * compressed_bytes)


def _gzip_chunks(p: Path, fd: int, chunk_bytes: int, watch: _Watch) -> Iterator[bytes]:
    cap = inflate_cap(watch.opened.st_size)
    total = 0
    with gzip.GzipFile(fileobj=os.fdopen(os.dup(fd), "rb")) as f:
        while True:
            try:
                data = f.read(chunk_bytes)
            except (OSError, EOFError, zlib.error) as exc:  # a truncated or corrupt .gz
                watch.check()  # a file cut while being read says so, rather than looking corrupt
                raise CollectorError(f"cannot read {str(p)!r}: {exc}") from None
            watch.check()
            if not data:
                return
            total += len(data)
            if total > cap:
                raise CollectorError(f"{str(p)!r} inflates to more than {cap >> 20} MiB, {INFLATE_RATIO} times its "
                                     f"compressed size: a .gz this repetitive is refused rather than read")
            yield data
