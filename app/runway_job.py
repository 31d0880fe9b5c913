"""The capacity runway as the CLI, the console and `hetpool serve` run it: read the stored requests in one short
read, compute with no connection held, save the result in one short write."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from canonical.timeunits import DAY_MS, WEEK_MS
from pool_registry import Registry
from replay.candidate import Candidate
from replay.exceptions import RunwayError
from replay.runway.breaking import Progress, Runway
from replay.runway.stored import RunwayAsk, runway_of
from store import Access
from store.db import transaction
from store.runways import save_runway


@dataclass(frozen=True)
class RunwayDone:
    """A computed runway, the notes on what was left out, the trace it read and when it was computed."""

    runway: Runway
    notes: tuple[str, ...]
    trace: str | None
    computed_ms: int


def compute_runway_job(store: Access, registry: Registry, candidate: Candidate, ask: RunwayAsk, *,
                       trace: str | None = None, progress: Progress | None = None,
                       clock: Callable[[], float] = time.time, save: bool = True) -> RunwayDone:
    """Read the window's requests, compute the runway and (with save) store it for the console and the alert."""
    from replay.whatif import pick_trace
    from store.requests import list_traces, read_history, read_requests
    from store.views.faults import telemetry_for

    with store.read() as con:
        traces = list_traces(con)
        if traces.height == 0:
            raise RunwayError("no stored requests: ingest traffic first (hetpool ingest traffic)")
        name, _ = pick_trace(traces, trace)
        row = traces.filter(traces["trace"] == name).row(0, named=True) if name else traces.row(0, named=True)
        end_ms = int(row["last_ms"]) + 1
        requests = read_requests(con, trace=name, start_ms=end_ms - ask.window_days * DAY_MS)
        replay_start = max(end_ms - WEEK_MS, int(row["first_ms"]))
        history = read_history(con, trace=name, before_ms=replay_start)
        telemetry = (telemetry_for(con, replay_start, end_ms - 1, candidate.faults.window_days)
                     if candidate.faults.mode != "off" else None)
    runway, notes = runway_of(candidate, requests, registry, ask, history_start_ms=int(row["first_ms"]),
                              history=history, telemetry=telemetry, spreads=candidate.step_time_spread,
                              progress=progress)
    computed_ms = int(clock() * 1000)
    if save:
        with store.write("runway") as con, transaction(con):
            save_runway(con, computed_ms, rows(runway, candidate.name))
    return RunwayDone(runway, tuple(notes), name, computed_ms)


def rows(runway: Runway, candidate: str) -> list[dict[str, Any]]:
    """The store's rows of a runway (store.runways.FIELDS)."""
    out = []
    for p in runway.pools:
        d = p.data()
        out.append({**d, "today": runway.today, "horizon_weeks": runway.horizon_weeks,
                    "tolerance": runway.tolerance, "candidate": candidate, "status": p.status,
                    **{k: getattr(p, k) for k in ("breaks_on", "breaks_on_low", "breaks_on_high")}})
    return out
