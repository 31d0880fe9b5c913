"""Runs each collector on its own schedule in its own thread, keeps its status, and stops cleanly.

A stop request is seen between runs and between the chunks of a pull: the run under way commits or rolls
back as a whole (every ingest run is one transaction), and a restart continues from the watermarks.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence

from canonical.redact import redact
from canonical.timeunits import iso_utc
from collectors.exceptions import CollectorError
from collectors.service.base import Collector, Outcome, Status
from collectors.service.prometheus_pull import PullIncomplete
from normalizers import NormalizerError
from pool_registry import ConfigError
from store import Access, StoreError

OPERATOR_ERRORS = (CollectorError, NormalizerError, StoreError, ConfigError, PullIncomplete)

Log = Callable[[str], None]


class Runner:
    """The collectors of one service, their threads and their statuses."""

    def __init__(self, store: Access, collectors: Sequence[Collector], *, log: Log | None = None,
                 clock: Callable[[], float] = time.time):
        self.store = store
        self.collectors = list(collectors)
        self.log = log or (lambda _line: None)
        self.clock = clock
        self.stopping = threading.Event()
        self._lock = threading.Lock()
        now = clock()
        self._status = {c.name: Status(c.name, c.kind, c.describe(), c.every_s, c.max_lag_s, now, c.expects_data)
                        for c in self.collectors}
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        """One thread per collector; each runs at once, then every `every_s` seconds."""
        for c in self.collectors:
            t = threading.Thread(target=self._loop, args=(c,), name=f"collector-{c.name}", daemon=True)
            t.start()
            self._threads.append(t)

    def stop(self, timeout_s: float = 60.0) -> bool:
        """Ask every collector to stop and wait for the runs under way; True when all threads ended."""
        self.stopping.set()
        deadline = time.monotonic() + timeout_s
        for t in self._threads:
            t.join(max(0.0, deadline - time.monotonic()))
        return not any(t.is_alive() for t in self._threads)

    def statuses(self) -> list[dict[str, object]]:
        """Every collector's status as plain data, health computed now."""
        now = self.clock()
        with self._lock:
            return [s.as_dict(now) for s in self._status.values()]

    def healthy(self) -> bool:
        """True when no collector has a problem."""
        return all(bool(s["healthy"]) for s in self.statuses())

    def run_once(self, c: Collector) -> None:
        """One run of one collector, its outcome or its error recorded."""
        started = self.clock()
        try:
            outcome = c.run(self.store, self.stopping.is_set)
        except Exception as exc:  # any failure is the collector's status, never the service's end
            self._record(c, started, None, f"{type(exc).__name__}: {exc}" if not _user_error(exc) else str(exc))
            return
        self._record(c, started, outcome, None)

    def _loop(self, c: Collector) -> None:
        while not self.stopping.is_set():
            began = time.monotonic()
            self.run_once(c)
            self.stopping.wait(max(0.0, c.every_s - (time.monotonic() - began)))

    def _record(self, c: Collector, started: float, outcome: Outcome | None, error: str | None) -> None:
        with self._lock:
            s = self._status[c.name]
            repeated = error is not None and redact(error) == s.last_error
            recovered = s.failures_since_success if outcome is not None else 0
            down_since = s.last_ok_at
            s.attempts += 1
            s.last_run_at = started
            s.last_error = None if error is None else redact(error)
            if outcome is None:
                s.failures += 1
                s.failures_since_success += 1
            else:
                s.failures_since_success = 0
                s.last_ok_at = started
                s.last = outcome
                s.total_stored += outcome.stored
                s.total_rejected += outcome.rejected
                if outcome.stored or outcome.duplicates:  # another path may have stored the same rows first
                    s.last_data_at = started
                if outcome.newest_ms is not None:
                    s.newest_ms = outcome.newest_ms
        if error is not None and not repeated:  # a target that stays down is said once, not every interval
            self.log(f"{c.name}: {error}")
        if recovered:  # said once too, so the log shows when it came back
            since = f" (last success {iso_utc(down_since)})" if down_since is not None else ""
            self.log(f"{c.name}: recovered after {recovered} failed run(s){since}")
        elif outcome is not None and (outcome.stored or outcome.rejected):
            # folded reads (a sticky code repeating) are no deduplication: said apart from rows already stored
            self.log(f"{c.name}: read {outcome.read}, stored {outcome.stored}, rejected {outcome.rejected}, "
                     f"duplicates {outcome.duplicates - outcome.folded}, folded {outcome.folded}, "
                     f"ignored {outcome.ignored}")


def _user_error(exc: Exception) -> bool:
    """Errors whose message is already a sentence for the operator (the layers' own exception classes)."""
    return isinstance(exc, OPERATOR_ERRORS)
