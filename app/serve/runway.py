"""The capacity runway of `hetpool serve`: `hetpool replay runway` on a schedule (daily by default), stored, and
the alerts of pools whose stored runway is shorter than `runway_alert_weeks`.

The alerts ride with the status alerts (app/serve/alerting.py adds them to each of its sends, through the same
Alertmanager client): a pool's alert is re-sent every run while its runway stays short, and resolved on the first
run after a computation shows it longer, or holding.
"""

from __future__ import annotations

import datetime as dt
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import polars as pl

from app.runway_job import compute_runway_job
from app.serve.config import RunwayPlan
from canonical.redact import redact
from canonical.timeunits import iso_utc
from pool_registry import Registry
from status.alerts import Alert, page_url, vendor_of
from store import Access, require_registry

Log = Callable[[str], None]
ALERT = "HetpoolPoolRunway"


@dataclass
class RunwayStatus:
    """The schedule's life so far."""

    runs: int = 0
    failures: int = 0
    last_run_at: float | None = None
    last_ok_at: float | None = None
    last_error: str | None = None
    breaking: tuple[str, ...] = ()

    def problems(self) -> list[str]:
        """Why the runway is not being computed (empty: it is)."""
        return [] if self.last_error is None else [f"last run failed: {self.last_error}"]


class RunwaySchedule:
    """Computes and stores the runway at once, then every `every_s` seconds, in its own thread."""

    def __init__(self, store: Access, plan: RunwayPlan, *, log: Log | None = None,
                 clock: Callable[[], float] = time.time):
        self.store = store
        self.plan = plan
        self.log = log or (lambda _line: None)
        self.clock = clock
        self.stopping = threading.Event()
        self.status = RunwayStatus()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._loop, name="runway", daemon=True)

    def start(self) -> RunwaySchedule:
        """Run on the schedule until stopped."""
        self._thread.start()
        return self

    def stop(self, timeout_s: float = 60.0) -> bool:
        """Stop after the computation under way; True when the thread ended."""
        self.stopping.set()
        if self._thread.is_alive():
            self._thread.join(timeout_s)
        return not self._thread.is_alive()

    def run_once(self) -> None:
        """One computation, stored, its result or its error recorded."""
        from app.commands.replay import DEFAULT_RUNWAY_CANDIDATE
        from replay import load_candidate, load_gate
        from replay.gate import DEFAULT_SLA_VIOLATION_RATE
        from replay.runway.stored import RunwayAsk

        started = self.clock()
        try:
            with self.store.read() as con:
                registry = require_registry(con)
            candidate = load_candidate(self.plan.candidate or DEFAULT_RUNWAY_CANDIDATE, registry)
            tolerance = load_gate(self.plan.gate).sla_tolerance if self.plan.gate else DEFAULT_SLA_VIOLATION_RATE
            ask = RunwayAsk(window_days=self.plan.window_days, growth=self.plan.growth,
                            horizon_weeks=self.plan.horizon_weeks, tolerance=tolerance)
            done = compute_runway_job(self.store, registry, candidate, ask, clock=self.clock)
        except Exception as exc:  # the schedule's status, never the service's end
            message = redact(f"{type(exc).__name__}: {exc}")
            with self._lock:
                repeated = message == self.status.last_error
                self.status.runs, self.status.failures = self.status.runs + 1, self.status.failures + 1
                self.status.last_run_at, self.status.last_error = started, message
            if not repeated:
                self.log(f"runway: {message}")
            return
        breaking = tuple(p.pool for p in done.runway.breaking)
        with self._lock:
            self.status.runs += 1
            self.status.last_run_at = self.status.last_ok_at = started
            self.status.last_error, self.status.breaking = None, breaking
        self.log(f"runway: {len(done.runway.pools)} pools computed in {self.clock() - started:.0f} s"
                 + (f"; breaking within the horizon: {', '.join(breaking)}" if breaking else "; all hold"))

    def report(self) -> dict[str, Any]:
        """The schedule's status as plain data, for /health."""
        with self._lock:
            s = self.status
            return {"every_s": self.plan.every_s, "healthy": not s.problems(), "problems": s.problems(),
                    "runs": s.runs, "failures": s.failures, "last_run_at": iso_utc(s.last_run_at),
                    "last_ok_at": iso_utc(s.last_ok_at), "last_error": s.last_error, "breaking": list(s.breaking)}

    def _loop(self) -> None:
        while not self.stopping.is_set():
            began = time.monotonic()
            self.run_once()
            self.stopping.wait(max(0.0, self.plan.every_s - (time.monotonic() - began)))


def runway_alerts(latest: pl.DataFrame, registry: Registry, weeks: float, today: dt.date,
                  console_url: str = "") -> tuple[Alert, ...]:
    """The alert of every pool whose newest stored runway (store.runways.latest_runways) ends within `weeks`
    of today."""
    out = []
    for r in latest.iter_rows(named=True):
        breaks = r["breaks_on"]
        if breaks is None or (breaks - today).days >= weeks * 7:
            continue
        left = max(0.0, (breaks - today).days / 7)
        band = f"earliest {r['breaks_on_low']}, latest {r['breaks_on_high'] or 'past the horizon'}"
        fix = (f"; {r['replicas_to_add']} more replica(s) hold the horizon (${r['added_cost_per_month_usd']:,.0f} a "
               "month)" if r["replicas_to_add"] else "")
        labels = tuple(sorted((k, v) for k, v in {"alertname": ALERT, "severity": "warning", "pool": r["pool"],
                                                   "vendor": vendor_of(registry, r["pool"])}.items() if v))
        computed = iso_utc(r["computed_ms"] / 1000)
        out.append(Alert(labels, f"pool {r['pool']} breaks its SLA tolerance in ~{left:.1f} weeks, on {breaks} "
                                 f"({band})",
                         f"at {r['growth_per_week']:+.1%}/week the share of its requests missing their SLA passes "
                         f"{r['tolerance']:.1%} on {breaks}{fix}; runway computed {computed} under "
                         f"'{r['candidate']}'. " + " ".join(json.loads(r["notes"])),
                         page_url(console_url, r["pool"])))
    return tuple(out)


def stored_runway_alerts(store: Access, weeks: float, console_url: str = "",
                         clock: Callable[[], float] = time.time) -> Callable[[], tuple[Alert, ...]]:
    """What the alert sender adds to each send: the runway alerts of the newest stored runways."""
    from store.runways import latest_runways

    def read() -> tuple[Alert, ...]:
        with store.read() as con:
            latest = latest_runways(con)
            registry = require_registry(con)
        today = dt.datetime.fromtimestamp(clock(), dt.UTC).date()
        return runway_alerts(latest, registry, weeks, today, console_url)
    return read
