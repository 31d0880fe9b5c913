"""Exposition files read in bounded chunks, so a file larger than memory streams through."""

from __future__ import annotations

import gzip
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO, cast

from collectors.errors import CollectorError

CHUNK_BYTES = 32 << 20


def open_exposition(path: str | Path) -> BinaryIO:
    """Open a file for reading (gzip when it ends in .gz), with a clear error when that is impossible."""
    p = Path(path)
    try:
        if p.is_dir():
            raise CollectorError(f"{str(p)!r} is a directory; expected an exposition file")
        return cast(BinaryIO, gzip.open(p, "rb") if p.suffix == ".gz" else open(p, "rb"))
    except FileNotFoundError:
        raise CollectorError(f"file {str(p)!r} not found") from None
    except PermissionError:
        raise CollectorError(f"file {str(p)!r} is not readable (permission denied)") from None


def read_chunks(path: str | Path, chunk_bytes: int = CHUNK_BYTES) -> Iterator[bytes]:
    """Yield the file's bytes chunk by chunk."""
    with open_exposition(path) as f:
        while True:
            try:
                data = f.read(chunk_bytes)
            except (OSError, EOFError) as exc:  # a truncated or corrupt .gz
                raise CollectorError(f"cannot read {str(path)!r}: {exc}") from None
            if not data:
                return
            yield data
