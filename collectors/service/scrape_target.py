"""A scraped exporter endpoint: each run is one scrape, stamped with its time."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

from collectors.pipeline import IngestOptions, ingest_scrapes
from collectors.scrape import scrape
from collectors.service.base import Outcome, StopCheck
from store import Access


@dataclass
class ScrapeTarget:
    """GET a /metrics endpoint every `every_s` seconds."""

    name: str
    url: str
    every_s: float = 15.0
    max_lag_s: float = 60.0
    pool: str | None = None
    profile: str | None = None
    node: str | None = None
    profiles_dirs: tuple[Path, ...] = ()
    canonical: bool = False  # canonical series (a feed), read without a profile
    expects_data: bool = True
    kind: str = "scrape"

    def describe(self) -> str:
        """The endpoint's URL."""
        return f"{'canonical ' if self.canonical else ''}scrape of {self.url}"

    def run(self, store: Access, stop: StopCheck) -> Outcome:
        """One scrape, one ingest run."""
        options = IngestOptions(pool=self.pool, profile=self.profile, profiles_dirs=self.profiles_dirs, node=self.node,
                                canonical=self.canonical)
        # a stop ends a scrape waiting on a slow target at once, not at its deadline
        (report,) = ingest_scrapes(store, self.url, options, count=1, fetch=functools.partial(scrape, abort=stop))
        c = report.counts
        return Outcome(c.read, c.stored, c.rejected, c.duplicates, 1, None, tuple(report.warnings), c.ignored,
                       report.folded)
