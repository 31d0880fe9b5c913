"""Request traces into the requests table: the one write path of `hetpool ingest traffic` and the demo.

The trace formats are parsed by traces/ (pure: bytes in, rows and rejects out); this is the collector that
stores what they parsed, as one run that accounts for every row read.
"""

from __future__ import annotations

from store import Access, IngestRun, commit_run
from store.requests import add_requests
from traces import Parsed


def ingest_traffic(store: Access, parsed: Parsed, *, trace: str, source: str) -> IngestRun:
    """Store the requests not stored before under `trace`, and every reject, as one committed run."""
    run = IngestRun("traffic", source)
    run.add_read(parsed.read)
    run.add_rejects(parsed.rejects)
    add_requests(run, trace, parsed.frame)
    commit_run(store, run)
    return run
