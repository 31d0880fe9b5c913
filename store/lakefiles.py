"""The files beside a lake's partitions: _schema.json, _manifest.json, the writer's lock, and atomic JSON writes.

Every file is first written under a dot-prefixed temporary name in its own folder and then renamed into place,
so a reader of `DIR/**/*.parquet` (or of the JSON files) never sees half a file, whatever kills the writer.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from store.exceptions import StoreError

SCHEMA_FILE = "_schema.json"
MANIFEST_FILE = "_manifest.json"
LOCK_FILE = ".lock"
MANIFEST_FORMAT = 1
# The lake schema version _schema.json names: 2 since ts is a UTC millisecond TIMESTAMP and attributes a map of
# strings; 1 (int64 milliseconds and JSON text) when _schema.json names none. store.lakeparquet tells them apart.
SCHEMA_VERSION = 2

Replace = Callable[[Path, Path], None]  # os.replace, or a test's failing stand-in


@dataclass(frozen=True)
class Fingerprint:
    """What a partition holds: its row count and an order-independent checksum of its rows."""

    rows: int
    checksum: str


@dataclass(frozen=True)
class Manifest:
    """The partitions a lake holds, each with the fingerprint of the rows it was written from."""

    resolution: str
    metrics: tuple[str, ...]  # the metrics every partition holds; empty: all
    partitions: dict[str, Fingerprint]


def temp_name(final: Path) -> Path:
    """A dot-prefixed name beside `final` that no `*.parquet` glob or Hive reader picks up."""
    return final.with_name(f".{final.name}.{os.getpid()}.tmp")


def write_json(path: Path, body: dict[str, Any], replace: Replace = os.replace) -> bool:
    """Write `body` to `path` through a temporary file and a rename; False (nothing written) when unchanged."""
    text = json.dumps(body, indent=2, sort_keys=True) + "\n"
    if path.exists() and path.read_text() == text:
        return False
    tmp = temp_name(path)
    tmp.write_text(text)
    try:
        replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return True


def read_manifest(folder: Path) -> Manifest | None:
    """The lake's manifest, None for a new or empty folder; a folder with other files is refused."""
    path = folder / MANIFEST_FILE
    if not path.exists():
        visible = [p for p in folder.iterdir() if not p.name.startswith(".")] if folder.is_dir() else []
        if visible:
            raise StoreError(f"{str(folder)!r} holds files but no {MANIFEST_FILE}, so it is not a lake an export "
                             "wrote; pick a new or empty folder")
        return None
    try:
        body = json.loads(path.read_text())
        parts = {key: Fingerprint(int(v["rows"]), str(v["checksum"])) for key, v in body["partitions"].items()}
        if body.get("format") != MANIFEST_FORMAT:
            raise ValueError(f"format {body.get('format')!r}, expected {MANIFEST_FORMAT}")
        return Manifest(str(body["resolution"]), tuple(str(m) for m in body["metrics"]), parts)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        why = f"no field {exc.args[0]!r}" if isinstance(exc, KeyError) else str(exc)
        raise StoreError(f"{str(path)!r} is not a lake manifest ({why}); move it away to write the lake anew") from None


def read_schema_version(folder: Path) -> int | None:
    """The lake schema version the folder's _schema.json names (1 when it names none); None without one."""
    path = folder / SCHEMA_FILE
    if not path.exists():
        return None
    try:
        version = json.loads(path.read_text()).get("schema_version", 1)
        if not isinstance(version, int) or isinstance(version, bool):
            raise ValueError(f"schema_version {version!r} is not a number")
        return version
    except (ValueError, AttributeError) as exc:
        raise StoreError(f"{str(path)!r} is not a lake schema ({exc}); move it away to write the lake anew") from None


def write_manifest(folder: Path, manifest: Manifest, replace: Replace = os.replace) -> bool:
    """Store the manifest atomically; False when it is unchanged."""
    parts = {key: {"rows": f.rows, "checksum": f.checksum} for key, f in sorted(manifest.partitions.items())}
    return write_json(folder / MANIFEST_FILE,
                      {"format": MANIFEST_FORMAT, "resolution": manifest.resolution,
                       "metrics": list(manifest.metrics), "partitions": parts}, replace)


@contextmanager
def writer_lock(folder: Path) -> Iterator[None]:
    """One export at a time per lake; the lock goes with the process, so a killed export leaves none behind. Its
    file lies beside the lake (`.<name>.lock`), not in it, so readers of the lake see only the lake's files."""
    with lock_path(folder).open("a") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise StoreError(f"another export is writing the lake {str(folder)!r}; try again when it ends") from None
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def lock_path(folder: Path) -> Path:
    """The lock file of a lake: beside its folder."""
    resolved = folder.resolve()
    return resolved.parent / f".{resolved.name}{LOCK_FILE}"


def remove_leftovers(folder: Path) -> int:
    """Delete temporary files a killed export left, and the lock file earlier versions kept inside the lake (the
    caller holds the lock, so none is being written)."""
    found = [*folder.glob(".*.tmp"), *folder.glob("date=*/pool=*/.*.tmp"), *folder.glob(LOCK_FILE)]
    for p in found:
        p.unlink(missing_ok=True)
    return len(found)
