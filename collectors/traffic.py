"""Request traces into the requests table: the one write path of `hetpool ingest traffic` and the demo.

The trace formats are parsed by the replay layer's adapters (pure: bytes in, rows and rejects out); this is
the collector that stores what they parsed, as one run that accounts for every row read.
"""

from __future__ import annotations

from typing import Protocol

import polars as pl

from store import Access, IngestRun, commit_run
from store.requests import add_requests


class ParsedTraffic(Protocol):
    """What a traffic adapter parsed: the rows it read, the requests, and the rows it rejected with why."""

    @property
    def read(self) -> int:
        """Rows read from the trace."""
        ...

    @property
    def frame(self) -> pl.DataFrame:
        """The requests (the requests table's columns but `trace`)."""
        ...

    @property
    def rejects(self) -> pl.DataFrame:
        """Rejected rows: line, record, reason."""
        ...


def ingest_traffic(store: Access, parsed: ParsedTraffic, *, trace: str, source: str) -> IngestRun:
    """Store the requests not stored before under `trace`, and every reject, as one committed run."""
    run = IngestRun("traffic", source)
    run.add_read(parsed.read)
    run.add_rejects(parsed.rejects)
    add_requests(run, trace, parsed.frame)
    commit_run(store, run)
    return run
