"""Everything the tracker needs about one pool, read from the store in one go."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

import duckdb
import polars as pl

from onboarding.stability import Telemetry
from store.evidence import StoredEvidence, latest_evidence_of
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
        return dict(self._by_item.get(item, {}))

    @cached_property
    def _by_item(self) -> dict[str, dict[str, StoredEvidence]]:
        # asked once per checklist item: grouped once rather than scanned each time
        out: dict[str, dict[str, StoredEvidence]] = {}
        for e in self.evidence:
            out.setdefault(e.item, {})[e.role] = e
        return out


def read_facts(con: duckdb.DuckDBPyConnection, pool: str) -> Facts:
    """Read a pool's facts (several short queries on one connection)."""
    return read_facts_of(con, (pool,))[pool]


def read_facts_of(con: duckdb.DuckDBPyConnection, pools: tuple[str, ...]) -> dict[str, Facts]:
    """Read the facts of many pools with the same few queries as one pool's, each answering for all of them."""
    spans, fatal, memory = views.pool_spans(con, pools), views.fatal_hours(con, pools), \
        views.hourly_memory(con, pools)
    metrics, heard = views.metrics_seen(con, pools), views.devices_heard(con, pools)
    rejects, routed = views.unexplained_rejects(con, pools), views.routed_requests(con, pools)
    gates, evidence = views.last_gate_with(con, pools), latest_evidence_of(con, pools)
    return {p: Facts(Telemetry(*spans[p], fatal[p], memory[p]), metrics[p], heard[p], rejects[p], routed[p], gates[p],
                     evidence[p]) for p in pools}
