"""A job `hetpool serve` runs on a schedule in its own thread (the lake export, the capacity runway): at once, then
every `every_s` seconds until stopped, each run's result or error kept for /health, an error logged once until it
changes, and no failure ever ending the service."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from canonical.redact import redact
from canonical.timeunits import iso_utc

Log = Callable[[str], None]
Result = TypeVar("Result")


@dataclass
class RunStatus:
    """A schedule's life so far."""

    runs: int = 0
    failures: int = 0
    last_run_at: float | None = None
    last_ok_at: float | None = None
    last_error: str | None = None

    def problems(self) -> list[str]:
        """Why the job is not healthy (empty: it is)."""
        return [] if self.last_error is None else [f"last run failed: {self.last_error}"]

    def report(self) -> dict[str, Any]:
        """The life so far as plain data, for /health."""
        return {"healthy": not self.problems(), "problems": self.problems(), "runs": self.runs,
                "failures": self.failures, "last_run_at": iso_utc(self.last_run_at),
                "last_ok_at": iso_utc(self.last_ok_at), "last_error": self.last_error}


Status = TypeVar("Status", bound=RunStatus)


class Schedule(Generic[Result, Status]):
    """Runs `work` at once, then every `every_s` seconds, in a thread named `name`; a subclass says what the work
    is, how its errors read and what its result adds to the status and the log."""

    def __init__(self, name: str, every_s: float, status: Status, *, log: Log | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.name = name
        self.status = status  # the common fields, and the subclass's own beside them
        self.every_s = every_s
        self.log = log or (lambda _line: None)
        self.clock = clock
        self.stopping = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)

    def work(self) -> Result:
        """One run's work."""
        raise NotImplementedError

    def error_text(self, exc: Exception) -> str:
        """How a failed run's error reads, credentials removed."""
        return redact(f"{type(exc).__name__}: {exc}")

    def keep(self, result: Result) -> None:
        """Keep what a run's result adds to the status (called under the status lock)."""

    def announce(self, result: Result, started: float) -> None:
        """Log what a run did."""

    def start(self) -> Schedule[Result, Status]:
        """Run on the schedule until stopped."""
        self._thread.start()
        return self

    def stop(self, timeout_s: float = 60.0) -> bool:
        """Stop after the run under way; True when the thread ended."""
        self.stopping.set()
        if self._thread.is_alive():
            self._thread.join(timeout_s)
        return not self._thread.is_alive()

    def run_once(self) -> None:
        """One run, its result or its error recorded."""
        started = self.clock()
        try:
            result = self.work()
        except Exception as exc:  # the schedule's status, never the service's end
            message = self.error_text(exc)
            with self._lock:
                s = self.status
                repeated = message == s.last_error
                s.runs, s.failures, s.last_run_at, s.last_error = s.runs + 1, s.failures + 1, started, message
            if not repeated:
                self.log(f"{self.name}: {message}")
            return
        with self._lock:
            s = self.status
            s.runs += 1
            s.last_run_at = s.last_ok_at = started
            s.last_error = None
            self.keep(result)
        self.announce(result, started)

    def common_report(self) -> dict[str, Any]:
        """The status every schedule reports, as plain data."""
        with self._lock:
            return {"every_s": self.every_s, **self.status.report()}

    def _loop(self) -> None:
        while not self.stopping.is_set():
            began = time.monotonic()
            self.run_once()
            self.stopping.wait(max(0.0, self.every_s - (time.monotonic() - began)))
