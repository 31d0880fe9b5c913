"""What `hetpool serve` runs on a schedule: a small Collector protocol and the status each run leaves behind."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from canonical.timeunits import iso_utc
from store import Access

StopCheck = Callable[[], bool]  # true once the service is stopping: finish or drop the current run


@dataclass(frozen=True)
class Outcome:
    """One run of a collector: what it read and stored, and how far its data reaches (None: unknown)."""

    read: int = 0
    stored: int = 0
    rejected: int = 0
    duplicates: int = 0
    runs: int = 0  # ingest runs committed
    newest_ms: int | None = None  # the newest time covered, for the lag (a Prometheus watermark)
    warnings: tuple[str, ...] = ()
    ignored: int = 0  # read from metrics the profiles ignore
    folded: int = 0  # of the duplicates, reads the normalizer folded as repeats (not rows stored twice)


class Collector(Protocol):
    """A source brought into the store every `every_s` seconds."""

    name: str
    kind: str
    every_s: float
    max_lag_s: float
    expects_data: bool  # false for a source that may rightly stay quiet (a drop folder)

    def run(self, store: Access, stop: StopCheck) -> Outcome:
        """Collect once; raise a CollectorError (or any user error) when the source cannot be read."""
        ...

    def describe(self) -> str:
        """The source in words, with no credentials: 'scrape of http://h1:9400/metrics'."""
        ...


@dataclass
class Status:
    """A collector's life so far, as the health endpoint and the console show it."""

    name: str
    kind: str
    source: str
    every_s: float
    max_lag_s: float
    started_at: float
    expects_data: bool = True
    attempts: int = 0
    failures: int = 0  # in all
    failures_since_success: int = 0  # in a row, up to now: 0 once a run succeeds again
    last_run_at: float | None = None
    last_ok_at: float | None = None
    last_data_at: float | None = None  # the last run that brought device rows (new, or already stored)
    last_error: str | None = None
    last: Outcome = field(default_factory=Outcome)
    total_stored: int = 0
    total_rejected: int = 0
    newest_ms: int | None = None

    def lag_s(self, now: float) -> float | None:
        """How far the stored data trails now: the watermark when the source has one, else the last store; for a
        source that may rightly stay quiet (a drop folder), the time since its last run that took in everything
        waiting, since a folder with nothing new is not late."""
        if not self.expects_data:
            return None if self.last_ok_at is None else max(0.0, now - self.last_ok_at)
        if self.newest_ms is not None:
            return max(0.0, now - self.newest_ms / 1000)
        return None if self.last_data_at is None else max(0.0, now - self.last_data_at)

    def problems(self, now: float) -> list[str]:
        """Why this collector is not healthy (empty: healthy)."""
        if self.last_run_at is None:
            return [] if now - self.started_at < self.max_lag_s else ["has not finished a run yet"]
        out = []
        if self.last_error is not None:
            out.append(f"last run failed: {self.last_error}")
        if not self.expects_data:
            return out
        if self.last_data_at is None:
            out.append(f"has brought no data in {self.attempts} runs; the last read {self.last.read} samples and "
                       f"rejected {self.last.rejected} (a target with no device metrics?)")
        lag = self.lag_s(now)
        if lag is not None and lag > self.max_lag_s:
            out.append(f"data lags {lag:.0f} s behind (limit {self.max_lag_s:.0f} s)")
        return out

    def as_dict(self, now: float) -> dict[str, object]:
        """JSON-ready, with health and lag computed at `now`; times in ISO 8601 UTC."""
        problems = self.problems(now)
        lag = self.lag_s(now)
        return {
            "name": self.name, "kind": self.kind, "source": self.source, "every_s": self.every_s,
            "healthy": not problems, "problems": problems, "attempts": self.attempts, "failures": self.failures,
            "failures_since_success": self.failures_since_success, "last_run_at": iso_utc(self.last_run_at),
            "last_ok_at": iso_utc(self.last_ok_at), "last_data_at": iso_utc(self.last_data_at),
            "lag_s": None if lag is None else round(lag, 1), "last_error": self.last_error,
            "last": {"read": self.last.read, "stored": self.last.stored, "rejected": self.last.rejected,
                     "duplicates": self.last.duplicates, "folded": self.last.folded, "ignored": self.last.ignored},
            "total_stored": self.total_stored, "total_rejected": self.total_rejected,
        }
