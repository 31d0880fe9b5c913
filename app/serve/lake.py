"""The lake export of `hetpool serve`: `hetpool export --partition` on a schedule, with its last run for /health."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from app.serve.config import ExportPlan
from canonical.redact import redact
from canonical.timeunits import iso_utc
from store import Access, StoreError
from store.exports import ExportFilter, check_names
from store.lake import LakeResult, write_lake

Log = Callable[[str], None]
Export = Callable[..., LakeResult]


@dataclass
class ExportStatus:
    """The schedule's life so far."""

    runs: int = 0
    failures: int = 0
    last_run_at: float | None = None
    last_ok_at: float | None = None
    last_error: str | None = None
    last: LakeResult | None = None

    def problems(self) -> list[str]:
        """Why the export is not healthy (empty: healthy)."""
        return [] if self.last_error is None else [f"last run failed: {self.last_error}"]


class LakeExport:
    """Runs the export at once, then every `every_s` seconds, in its own thread; stops between partitions."""

    def __init__(self, store: Access, plan: ExportPlan, *, log: Log | None = None,
                 clock: Callable[[], float] = time.time, export: Export = write_lake):
        self.store = store
        self.plan = plan
        self.filter = ExportFilter(pools=plan.pools, metrics=plan.metrics)
        self.log = log or (lambda _line: None)
        self.clock = clock
        self.export = export
        self.stopping = threading.Event()
        self.status = ExportStatus()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._loop, name="export", daemon=True)

    def check(self) -> None:
        """Refuse at start a pool or metric the store does not know, rather than fail every run."""
        with self.store.read() as con:
            check_names(con, self.filter)

    def start(self) -> LakeExport:
        """Run on the schedule until stopped."""
        self._thread.start()
        return self

    def stop(self, timeout_s: float = 60.0) -> bool:
        """Ask the run under way to stop after its current partition; True when the thread ended."""
        self.stopping.set()
        if self._thread.is_alive():
            self._thread.join(timeout_s)
        return not self._thread.is_alive()

    def run_once(self) -> None:
        """One export, its result or its error recorded."""
        started = self.clock()
        try:
            result = self.export(self.store, self.plan.out, self.filter, stop=self.stopping.is_set)
        except Exception as exc:  # any failure is the export's status, never the service's end
            message = redact(str(exc) if isinstance(exc, (StoreError, OSError)) else f"{type(exc).__name__}: {exc}")
            with self._lock:
                repeated = message == self.status.last_error
                self.status.runs, self.status.failures = self.status.runs + 1, self.status.failures + 1
                self.status.last_run_at, self.status.last_error = started, message
            if not repeated:
                self.log(f"export: {message}")
            return
        with self._lock:
            self.status.runs += 1
            self.status.last_run_at = self.status.last_ok_at = started
            self.status.last_error, self.status.last = None, result
        if result.upgraded:
            self.log(f"export: rewrote {result.upgraded} partitions of an earlier lake schema version in "
                     f"{result.path}")
        if result.written:
            self.log(f"export: wrote {result.rows} rows in {result.written} partitions to {result.path}")

    def report(self) -> dict[str, Any]:
        """The schedule's status as plain data, for /health."""
        with self._lock:
            s = self.status
            last = None if s.last is None else {
                "rows": s.last.rows, "partitions_written": s.last.written, "partitions_unchanged": s.last.unchanged,
                "partitions_kept": s.last.kept, "resolution": s.last.resolution}
            return {"out": str(self.plan.out), "every_s": self.plan.every_s, "pools": list(self.plan.pools),
                    "metrics": list(self.plan.metrics), "healthy": not s.problems(), "problems": s.problems(),
                    "runs": s.runs, "failures": s.failures, "last_run_at": iso_utc(s.last_run_at),
                    "last_ok_at": iso_utc(s.last_ok_at), "last_error": s.last_error, "last": last}

    def _loop(self) -> None:
        while not self.stopping.is_set():
            began = time.monotonic()
            self.run_once()
            self.stopping.wait(max(0.0, self.plan.every_s - (time.monotonic() - began)))
