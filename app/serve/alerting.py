"""The alert sender of `hetpool serve`: the status rules every `every_s` seconds, their alerts to Alertmanager.

A firing alert is sent again every run, held until `hold_s` after it (four runs), so Alertmanager keeps it while
hetpool is alive and resolves it by itself when hetpool is gone; a status that clears is sent resolved. A down
Alertmanager is retried with backoff (doubling from `retry_s`, at most the run interval) while the alerts wait;
it is shown in /health and on the Collectors page, and the collectors run on regardless.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from app.alertmanager import Alertmanager, AlertmanagerError
from app.serve.config import AlertmanagerPlan
from app.status_read import Judged, judge
from canonical.redact import redact
from canonical.timeunits import iso_utc
from status.alerts import Alert, Labels, alerts_of, batch
from status.rules import StatusRules, load_rules
from store import Access

Log = Callable[[str], None]
Judge = Callable[[], Judged]
More = Callable[[], tuple[Alert, ...]]  # alerts of other sources sent with the statuses' (app/serve/runway.py)


@dataclass
class SenderStatus:
    """The sender's life so far."""

    runs: int = 0
    sends: int = 0
    failures: int = 0
    failures_since_success: int = 0
    last_run_at: float | None = None
    last_ok_at: float | None = None
    last_error: str | None = None
    firing: int = 0
    resolved: int = 0  # resolved alerts sent in all
    next_attempt_at: float | None = None

    def problems(self) -> list[str]:
        """Why alerts are not reaching Alertmanager (empty: they are)."""
        if self.last_error is None:
            return []
        return [f"{self.failures_since_success} send(s) failed since the last success, alerts waiting: "
                f"{self.last_error}"]


class AlertSender:
    """Judges the store and sends the alerts, at once and then every `every_s` seconds, in its own thread."""

    def __init__(self, store: Access, plan: AlertmanagerPlan, *, rules: StatusRules | None = None,
                 client: Alertmanager | None = None, judge_now: Judge | None = None, log: Log | None = None,
                 clock: Callable[[], float] = time.time, more: More | None = None):
        self.plan = plan
        self.client = client or Alertmanager(plan.url, timeout_s=plan.timeout_s)
        rules = rules or load_rules()
        self.judge = judge_now or (lambda: judge(store, rules, clock))
        self.more = more or (lambda: ())
        self.log = log or (lambda _line: None)
        self.clock = clock
        self.stopping = threading.Event()
        self.status = SenderStatus()
        self.firing: dict[Labels, int] = {}
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._loop, name="alerts", daemon=True)

    def start(self) -> AlertSender:
        """Run until stopped."""
        self._thread.start()
        return self

    def stop(self, timeout_s: float = 30.0) -> bool:
        """Stop after the send under way; True when the thread ended."""
        self.stopping.set()
        if self._thread.is_alive():
            self._thread.join(timeout_s)
        return not self._thread.is_alive()

    def run_once(self) -> float:
        """Judge, send, record; the seconds to wait before the next run (shorter after a failure)."""
        started = self.clock()
        try:
            judged = self.judge()
            current = alerts_of(judged.statuses, judged.registry, self.plan.console_url) + self.more()
            sent = batch(current, self.firing, int(started * 1000), int(self.plan.hold_s * 1000))
            if sent.bodies:
                self.client.post_alerts(sent.bodies)
        except Exception as exc:  # the sender's status, never the service's end
            message = redact(str(exc) if isinstance(exc, AlertmanagerError) else f"{type(exc).__name__}: {exc}")
            with self._lock:
                s = self.status
                repeated = message == s.last_error
                s.runs, s.failures, s.failures_since_success = s.runs + 1, s.failures + 1, s.failures_since_success + 1
                s.last_run_at, s.last_error = started, message
                wait = min(self.plan.retry_s * 2 ** (s.failures_since_success - 1), self.plan.every_s)
                s.next_attempt_at = started + wait
            if not repeated:
                self.log(f"alerts: {message}; retrying in {wait:g} s, collection goes on")
            return wait
        with self._lock:
            s = self.status
            recovered = s.failures_since_success
            s.runs += 1
            s.sends += bool(sent.bodies)
            s.last_run_at = s.last_ok_at = started
            s.last_error, s.failures_since_success = None, 0
            s.firing, s.resolved = len(sent.firing), s.resolved + sent.resolved
            s.next_attempt_at = started + self.plan.every_s
            new = [labels for labels in sent.firing if labels not in self.firing]
            self.firing = dict(sent.firing)
        if recovered:
            self.log(f"alerts: Alertmanager at {self.client.url} reached again after {recovered} failed send(s)")
        if new or sent.resolved:
            self.log(f"alerts: {len(sent.firing)} firing ({len(new)} new), {sent.resolved} resolved, "
                     f"sent to {self.client.url}")
        return self.plan.every_s

    def report(self) -> dict[str, Any]:
        """The sender's status as plain data, for /health and the Collectors page."""
        with self._lock:
            s = self.status
            return {"url": self.client.url, "every_s": self.plan.every_s, "healthy": not s.problems(),
                    "problems": s.problems(), "runs": s.runs, "sends": s.sends, "failures": s.failures,
                    "failures_since_success": s.failures_since_success, "last_run_at": iso_utc(s.last_run_at),
                    "last_ok_at": iso_utc(s.last_ok_at), "last_error": s.last_error, "firing": s.firing,
                    "resolved": s.resolved, "next_attempt_at": iso_utc(s.next_attempt_at)}

    def _loop(self) -> None:
        while not self.stopping.is_set():
            wait = self.run_once()
            self.stopping.wait(wait)
