"""The capacity runway of `hetpool serve`: `hetpool replay runway` on a schedule (daily by default), stored, and
the alerts of pools whose stored runway is shorter than `runway_alert_weeks`.

The alerts ride with the status alerts (app/serve/alerting.py adds them to each of its sends, through the same
Alertmanager client): a pool's alert is re-sent every run while its runway stays short, and resolved on the first
run after a computation shows it longer, or holding.
"""

from __future__ import annotations

import datetime as dt
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import polars as pl

from app.runway_job import RunwayDone, compute_runway_job
from app.serve.config import RunwayPlan
from app.serve.schedule import Log, RunStatus, Schedule
from canonical.timeunits import iso_utc
from pool_registry import Registry
from status.alerts import Alert, page_url, vendor_of
from store import Access, require_registry

ALERT = "HetpoolPoolRunway"


@dataclass
class RunwayStatus(RunStatus):
    """The schedule's life so far, with the pools its last run saw breaking."""

    breaking: tuple[str, ...] = ()


class RunwaySchedule(Schedule[RunwayDone, RunwayStatus]):
    """Computes and stores the runway at once, then every `every_s` seconds, in its own thread."""

    def __init__(self, store: Access, plan: RunwayPlan, *, log: Log | None = None,
                 clock: Callable[[], float] = time.time):
        super().__init__("runway", plan.every_s, RunwayStatus(), log=log, clock=clock)
        self.store = store
        self.plan = plan

    def work(self) -> RunwayDone:
        """One computation, stored."""
        from app.commands.replay import DEFAULT_RUNWAY_CANDIDATE
        from replay import load_candidate, load_gate
        from replay.gate import DEFAULT_SLA_VIOLATION_RATE
        from replay.runway.stored import RunwayAsk

        with self.store.read() as con:
            registry = require_registry(con)
        candidate = load_candidate(self.plan.candidate or DEFAULT_RUNWAY_CANDIDATE, registry)
        tolerance = load_gate(self.plan.gate).sla_tolerance if self.plan.gate else DEFAULT_SLA_VIOLATION_RATE
        ask = RunwayAsk(window_days=self.plan.window_days, growth=self.plan.growth,
                        horizon_weeks=self.plan.horizon_weeks, tolerance=tolerance)
        return compute_runway_job(self.store, registry, candidate, ask, clock=self.clock)

    def keep(self, result: RunwayDone) -> None:
        """The pools breaking within the horizon."""
        self.status.breaking = tuple(p.pool for p in result.runway.breaking)

    def announce(self, result: RunwayDone, started: float) -> None:
        """How many pools were computed, and which break."""
        breaking = tuple(p.pool for p in result.runway.breaking)
        self.log(f"runway: {len(result.runway.pools)} pools computed in {self.clock() - started:.0f} s"
                 + (f"; breaking within the horizon: {', '.join(breaking)}" if breaking else "; all hold"))

    def report(self) -> dict[str, Any]:
        """The schedule's status as plain data, for /health."""
        report = self.common_report()
        with self._lock:
            return {**report, "breaking": list(self.status.breaking)}


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
