"""A following Prometheus pull: each run continues every profile from its watermark (as --follow does)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from canonical.timeunits import HOUR_MS
from collectors.prometheus import PullOptions, pull, source_key
from collectors.promhttp import PromAuth, PromClient, RetryPolicy
from collectors.service.base import Outcome, StopCheck
from store import Access


@dataclass
class PrometheusPull:
    """Pulls the series the profiles know from any Prometheus-API store, chunk by chunk."""

    name: str
    url: str
    every_s: float = 15.0  # also the data's step
    max_lag_s: float = 120.0
    since_ms: int = HOUR_MS
    chunk_ms: int = HOUR_MS
    profiles: tuple[str, ...] = ()
    profiles_dirs: tuple[Path, ...] = ()
    pool: str | None = None
    insecure: bool = False
    timeout_s: float = 30.0
    canonical: bool = False  # canonical series (feed names), one sample per `every_s`; no profile or pool
    expects_data: bool = True
    kind: str = "prometheus"
    auth: PromAuth = field(default_factory=PromAuth.from_env, repr=False)

    def describe(self) -> str:
        """The store's URL (credentials never are part of it)."""
        return f"{'canonical ' if self.canonical else ''}pull from {source_key(self.url)}"

    def run(self, store: Access, stop: StopCheck) -> Outcome:
        """One pull from the watermarks up to now minus a step."""
        client = PromClient(self.url, self.auth, verify=not self.insecure,
                            retry=RetryPolicy(timeout_s=self.timeout_s))
        options = PullOptions(url=self.url, profiles=self.profiles, since_ms=self.since_ms,
                              step_ms=int(self.every_s * 1000), chunk_ms=self.chunk_ms,
                              profiles_dirs=self.profiles_dirs, pool=self.pool, canonical=self.canonical)
        report = pull(store, client, options, stop=stop)
        totals = report.totals()
        warnings = tuple(w for r in report.reports for w in r.warnings)
        if report.missing:
            missing = ", ".join(f"{p} ({lo}, {hi}]" for p, lo, hi in report.missing)
            raise PullIncomplete(f"chunks missing after retries: {missing}; the next run fetches them again")
        return Outcome(totals["read"], totals["stored"], totals["rejected"], totals["duplicates"], len(report.reports),
                       min(report.watermarks.values()) if report.watermarks else None, warnings, totals["ignored"],
                       sum(r.folded for r in report.reports))


class PullIncomplete(Exception):
    """Some chunks could not be fetched; what was fetched is stored, and the watermark stays before the gap."""
