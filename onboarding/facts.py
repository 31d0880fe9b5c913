"""Everything the tracker needs about one pool, read from the store in one go."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import duckdb
import polars as pl

from onboarding.stability import Telemetry
from store.evidence import StoredEvidence, latest_evidence
from store.views import onboarding as views


@dataclass(frozen=True)
class Facts:
    """The store's answers about a pool: telemetry, rejects, routing, the last gated replay and evidence files."""

    telemetry: Telemetry
    metrics: pl.DataFrame           # metric, first_ms, devices
    devices_heard: int
    rejects: tuple[int, str]        # unexplained rejects and an example reason
    routed: tuple[int, int | None]  # observed requests served and the first arrival
    gate: dict[str, Any] | None
    evidence: tuple[StoredEvidence, ...]

    def files(self, item: str) -> dict[str, StoredEvidence]:
        """The stored files of a checklist item by role."""
        return {e.role: e for e in self.evidence if e.item == item}


def read_facts(con: duckdb.DuckDBPyConnection, pool: str) -> Facts:
    """Read a pool's facts (several short queries on one connection)."""
    first, last = views.pool_span(con, pool)
    telemetry = Telemetry(first, last, views.fatal_hours(con, pool), views.hourly_memory(con, pool))
    return Facts(telemetry, views.metrics_seen(con, pool), views.devices_heard(con, pool),
                 views.unexplained_rejects(con, pool), views.routed_requests(con, pool),
                 views.last_gate_with(con, pool), latest_evidence(con, pool))
