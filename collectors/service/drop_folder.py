"""A watched folder of exporter files: each new file is ingested, then moved to done/ (or failed/, with why).

Writers should write under a name starting with '.' and rename the file into place when it is complete;
files changed in the last SETTLE_S seconds are left for the next run as well. A file ingested but not yet moved
when the service stopped is ingested again at the next start, which stores nothing twice.
"""

from __future__ import annotations

import functools
import os
import time
from dataclasses import dataclass
from pathlib import Path

from collectors.exceptions import CollectorError
from collectors.files import read_chunks
from collectors.pipeline import IngestOptions, ingest_exposition
from collectors.service.base import Outcome, StopCheck
from store import Access

SUFFIXES = (".prom", ".txt", ".om", ".metrics", ".gz")
SETTLE_S = 2.0


@dataclass
class DropFolder:
    """Ingest exposition files dropped into `path`."""

    name: str
    path: Path
    every_s: float = 10.0
    max_lag_s: float = 86_400.0  # files come when they come: only failures make a folder unhealthy
    pool: str | None = None
    profile: str | None = None
    node: str | None = None
    profiles_dirs: tuple[Path, ...] = ()
    expects_data: bool = False
    kind: str = "folder"

    def describe(self) -> str:
        """The folder."""
        return f"files dropped into {self.path}"

    def pending(self, now: float) -> list[Path]:
        """Complete files waiting, oldest first."""
        if not self.path.is_dir():
            raise CollectorError(f"drop folder {str(self.path)!r} does not exist; create it or fix the path")
        found = []
        for entry in self.path.iterdir():
            if entry.name.startswith(".") or not entry.is_file() or not entry.name.endswith(SUFFIXES):
                continue
            mtime = entry.stat().st_mtime
            if now - mtime >= SETTLE_S:
                found.append((mtime, entry.name, entry))
        return [e for _, _, e in sorted(found)]

    def run(self, store: Access, stop: StopCheck) -> Outcome:
        """Ingest every complete file; a bad file goes to failed/ and the others still go in."""
        read = stored = rejected = duplicates = ignored = runs = folded = 0
        failed: list[str] = []
        options = IngestOptions(pool=self.pool, profile=self.profile, profiles_dirs=self.profiles_dirs, node=self.node)
        for path in self.pending(time.time()):
            if stop():
                break
            try:
                report = ingest_exposition(store, functools.partial(read_chunks, path), kind="file", source=str(path),
                                           options=options)
            except CollectorError as exc:
                self._move(path, "failed", str(exc))
                failed.append(f"{path.name}: {exc}")
                continue
            self._move(path, "done", None)
            c = report.counts
            read, stored, rejected, duplicates, ignored, runs = (
                read + c.read, stored + c.stored, rejected + c.rejected, duplicates + c.duplicates, ignored + c.ignored,
                runs + 1)
            folded += report.folded
        if failed:
            raise CollectorError(f"{len(failed)} file(s) moved to failed/: {'; '.join(failed)}")
        return Outcome(read, stored, rejected, duplicates, runs, ignored=ignored, folded=folded)

    def _move(self, path: Path, where: str, why: str | None) -> None:
        target = self.path / where
        target.mkdir(exist_ok=True)
        os.replace(path, target / path.name)
        if why is not None:
            (target / f"{path.name}.error.txt").write_text(why + "\n", encoding="utf-8")
