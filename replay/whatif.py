"""The what-if workflow both faces share: pick traffic, replay a candidate and a baseline on it with one seed,
gate the candidate, and say what happened in the words the CLI prints and the console shows.

    traffic = stored_traffic(frame, trace=None, start="2026-12-01T10:00:00Z", end=None)
    whatif = run_whatif(candidate, traffic, registry, baseline=baseline, gate=gate, seed=0)
    print("\\n".join(whatif.report_lines()))

Nothing here reads or writes the database: the faces read the traffic and save the run (`run_record`) through
the store, so no connection is held while a replay computes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from pool_registry import Registry
from replay.candidate import candidate_to_dict
from replay.config import Candidate
from replay.engine import ReplayResult, run_replay
from replay.errors import ReplayError
from replay.fleet import PoolSpec, resolve_pools
from replay.gate import Gate, Verdict, evaluate
from replay.summary import Summary
from replay.traffic import Parsed

Progress = Callable[[float, str], None]  # (share done 0-1, what is happening now)


@dataclass(frozen=True)
class Traffic:
    """Requests to replay, how reports name them, notes about how they were read, and how to pick them again."""

    frame: pl.DataFrame
    described: str
    notes: tuple[str, ...] = ()
    spec: dict[str, Any] = field(default_factory=dict)


def stored_traffic(frame: pl.DataFrame, *, trace: str | None = None, start: str | None = None,
                   end: str | None = None, start_ms: int | None = None, end_ms: int | None = None) -> Traffic:
    """Stored requests already read for a trace and window (start and end as the user wrote them)."""
    what = f"stored requests{f' of trace {trace!r}' if trace else ''}" + (
        f" from {start}" if start else "") + (f" until {end}" if end else "")
    if frame.height == 0:
        raise ReplayError(f"no {what}; load some with 'hetpool ingest traffic PATH' or pass --traffic")
    spec = {"kind": "stored", "trace": trace, "start_ms": start_ms, "end_ms": end_ms}
    return Traffic(frame, f"{what} ({frame.height} requests)", spec=spec)


def file_traffic(name: str, fmt: str, parsed: Parsed) -> Traffic:
    """A parsed trace file; its rejected rows become a note naming the first one's line and reason."""
    notes: tuple[str, ...] = ()
    if parsed.rejects.height:
        notes = (f"{name}: {parsed.rejects.height} rows rejected, first: "
                 f"line {parsed.rejects['line'][0]}: {parsed.rejects['reason'][0]}",)
    return Traffic(parsed.frame, f"file {name} ({fmt}, {parsed.frame.height} requests)", notes,
                   {"kind": "file", "name": name, "format": fmt})


@dataclass(frozen=True)
class WhatIf:
    """A candidate and its baseline replayed on the same traffic with the same seed, and the gate's verdict."""

    traffic: str
    seed: int
    candidate: Candidate
    result: ReplayResult
    pools: tuple[PoolSpec, ...]
    baseline: Candidate | None = None
    base_result: ReplayResult | None = None
    base_pools: tuple[PoolSpec, ...] = ()
    gate: Gate | None = None
    verdict: Verdict | None = None
    traffic_spec: dict[str, Any] = field(default_factory=dict)

    @property
    def summary(self) -> Summary:
        """The candidate's summary."""
        return self.result.summary

    @property
    def base_summary(self) -> Summary | None:
        """The baseline's summary, when one ran."""
        return self.base_result.summary if self.base_result else None

    @property
    def failed(self) -> bool:
        """True when a gate ran and the candidate failed it."""
        return self.verdict is not None and not self.verdict.passed

    def data(self) -> dict[str, Any]:
        """Everything the run says, as plain data (the CLI's --json output, without the run id)."""
        out: dict[str, Any] = {"traffic": self.traffic, "candidate": self.summary.to_dict(),
                               "baseline": self.base_summary.to_dict() if self.base_summary else None}
        if self.verdict:
            out.update(verdict=self.verdict.verdict, reasons=self.verdict.reasons,
                       checks=[c.__dict__ for c in self.verdict.checks])
        return out

    def report_lines(self) -> list[str]:
        """The comparison table and the gate's checks, as the CLI prints them."""
        runs = [(self.candidate.name[:17], self.summary)]
        if self.baseline and self.base_summary:
            runs.append((self.baseline.name[:17], self.base_summary))
        lines = summary_lines(runs)
        if self.verdict:
            lines.append(f"gate: {self.verdict.verdict.upper()}")
            lines += [f"  {'ok  ' if c.passed else 'FAIL'} {c.message}" for c in self.verdict.checks]
        return lines

    def run_record(self, name: str | None = None, note: str | None = None) -> dict[str, Any]:
        """The keyword arguments that save this run in `replay_runs`."""
        return {"candidate": candidate_to_dict(self.candidate),
                "baseline": candidate_to_dict(self.baseline) if self.baseline else None,
                "traffic": self.traffic, "seed": self.seed, "summary": self.summary.to_dict(),
                "baseline_summary": self.base_summary.to_dict() if self.base_summary else None,
                "verdict": self.verdict.verdict if self.verdict else None,
                "reasons": self.verdict.reasons if self.verdict else [], "name": name, "note": note,
                "traffic_spec": self.traffic_spec or None,
                "gate": {k: v for k, v in self.gate.__dict__.items() if v is not None} if self.gate else None}


def run_whatif(candidate: Candidate, traffic: Traffic, registry: Registry, *, baseline: Candidate | None = None,
               gate: Gate | None = None, seed: int = 0, progress: Progress | None = None) -> WhatIf:
    """Replay the candidate (and the baseline) on the traffic with one seed; gate when a gate and a baseline are
    given. Pure: the result depends only on the arguments."""
    if gate is not None and baseline is None:
        raise ReplayError("a gate compares against a baseline; give a baseline too")
    say = progress or (lambda share, what: None)
    steps = 2 if baseline else 1
    pools = resolve_pools(registry, candidate)
    base_pools = resolve_pools(registry, baseline) if baseline else ()
    say(0.0, f"replaying {traffic.frame.height:,} requests under {candidate.name!r}")
    result = run_replay(candidate, traffic.frame, registry, seed)
    base = None
    if baseline:
        say(1 / steps, f"replaying the same requests under the baseline {baseline.name!r}")
        base = run_replay(baseline, traffic.frame, registry, seed)
    verdict = evaluate(gate, base.summary, result.summary) if gate and base else None
    say(1.0, "done")
    return WhatIf(traffic=traffic.described, seed=seed, candidate=candidate, result=result, pools=pools,
                  baseline=baseline, base_result=base, base_pools=base_pools, gate=gate, verdict=verdict,
                  traffic_spec=traffic.spec)


def fmt_s(v: float | None, unit: str = "s") -> str:
    """Seconds with three decimals, or '-' when there is no value."""
    return "-" if v is None else f"{v:.3f}{unit}"


def fmt_ms(v: float | None) -> str:
    """Seconds shown as milliseconds with one decimal, or '-'."""
    return "-" if v is None else f"{v * 1000:.1f}"


def summary_lines(runs: list[tuple[str, Summary]]) -> list[str]:
    """Summaries side by side, one column per run (the text of `hetpool replay run`)."""
    head = f"{'':<22}" + "".join(f"{name:>18}" for name, _ in runs)
    rows: list[tuple[str, Callable[[Summary], str]]] = [
        ("requests", lambda s: str(s.requests)), ("served", lambda s: str(s.served)),
        ("rejected", lambda s: str(s.rejected)), ("still queued", lambda s: str(s.still_queued)),
        ("busy cost", lambda s: f"${s.busy_cost_usd:,.2f}"),
        ("provisioned cost", lambda s: f"${s.provisioned_cost_usd:,.2f}"),
        ("busy cost per Mtok", lambda s: "-" if s.cost_per_mtok is None else f"${s.cost_per_mtok:,.4f}"),
        ("ttft p50/p99", lambda s: f"{fmt_s(s.ttft_p50)}/{fmt_s(s.ttft_p99)}"),
        ("tpot p50/p99 ms", lambda s: f"{fmt_ms(s.tpot_p50)}/{fmt_ms(s.tpot_p99)}"),
        ("e2e p50/p99", lambda s: f"{fmt_s(s.e2e_p50)}/{fmt_s(s.e2e_p99)}"),
        ("sla violations", lambda s: f"{s.sla_violation_rate * 100:.2f}%"),
        ("overflow q/d/r", lambda s: f"{s.overflow['queue']}/{s.overflow['degrade']}/{s.overflow['reject']}"),
    ]
    lines = [head] + [f"{label:<22}" + "".join(f"{get(s):>18}" for _, s in runs) for label, get in rows]
    for pool in runs[0][1].utilization:
        lines.append(f"{'util / kv ' + pool:<22}" + "".join(
            f"{s.utilization.get(pool, 0.0) * 100:>10.1f}% /{s.kv_use.get(pool, 0.0) * 100:>4.0f}%" for _, s in runs))
    return lines
