"""The what-if workflow both faces share: pick traffic, replay a candidate and a baseline on it with one seed,
gate the candidate, and say what happened in the words the CLI prints and the console shows.

    traffic = stored_traffic(frame, trace=None, start="2026-12-01T10:00:00Z", end=None, history=before)
    whatif = run_whatif(candidate, traffic, registry, baseline=baseline, gate=gate, seed=0, oracle_gap=True)
    print("\\n".join(whatif.report_lines()))

Nothing here reads or writes the database: the faces read the traffic (and, for a window of stored requests,
the ones stored before it, from which the online predictor starts) and save the run (`run_record`) through
the store, so no connection is held while a replay computes.

With `oracle_gap`, the candidate is replayed once more with the oracle predictor: what knowing every request's
output length would change. Every report of a run that used the oracle says so (ORACLE_NOTE).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from pool_registry import Registry
from replay.candidate import Candidate, PredictorSpec
from replay.candidate_loader import candidate_to_dict
from replay.engine import ReplayResult, run_replay
from replay.exceptions import ReplayError
from replay.fleet import PoolSpec, resolve_pools
from replay.gate import Gate, Verdict, evaluate
from replay.predictors import ORACLE_NOTE
from replay.summary import REUSE_SAID, PoolSummary, Summary
from traces import Parsed

Progress = Callable[[float, str], None]  # (share done 0-1, what is happening now)


@dataclass(frozen=True)
class Traffic:
    """Requests to replay, how reports name them, notes about how they were read, and how to pick them again."""

    frame: pl.DataFrame
    described: str
    notes: tuple[str, ...] = ()
    spec: dict[str, Any] = field(default_factory=dict)
    history: pl.DataFrame | None = None  # requests that completed before it (for the online predictor)
    telemetry: pl.DataFrame | None = None  # each pool's failures and throttling before it (replay.faults)

    @property
    def first_ms(self) -> int | None:
        """The first stored arrival, which the fault telemetry's window ends at; None for a file, whose
        timestamps need not be the store's (its window ends at the newest stored data)."""
        if self.spec.get("kind") != "stored" or self.frame.height == 0:
            return None
        return int(self.frame["arrival_ms"].min())  # type: ignore[arg-type]

    @property
    def last_ms(self) -> int | None:
        """The last stored arrival (None for a file)."""
        if self.spec.get("kind") != "stored" or self.frame.height == 0:
            return None
        return int(self.frame["arrival_ms"].max())  # type: ignore[arg-type]


def pick_trace(traces: pl.DataFrame, wanted: str | None) -> tuple[str | None, str | None]:
    """The trace a replay of stored requests reads, from the stored traces (trace, requests, first_ms, last_ms),
    and a note saying why when the store holds several: the one named, else the one with the newest request.
    Requests of different traces are never replayed as one: their arrivals may lie years apart."""
    names = traces["trace"].to_list()
    if wanted is not None:
        if wanted not in names:
            raise ReplayError(f"unknown trace {wanted!r}; stored: {', '.join(names) or '(none)'}")
        return wanted, None
    if not names:
        return None, None
    newest = traces.sort("last_ms", "trace", descending=True).row(0, named=True)
    if len(names) == 1:
        return str(newest["trace"]), None
    others = ", ".join(f"{r['trace']!r} ({r['requests']:,} requests, {_day(r['first_ms'])} to {_day(r['last_ms'])})"
                       for r in traces.sort("last_ms", descending=True).iter_rows(named=True)
                       if r["trace"] != newest["trace"])
    return str(newest["trace"]), (f"the store holds {len(names)} traces; replaying {newest['trace']!r}, the one with "
                                  f"the newest requests; the others: {others}; pick one with --trace NAME")


def _day(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).strftime("%Y-%m-%d %H:%M")


def stored_traffic(frame: pl.DataFrame, *, trace: str | None = None, start: str | None = None,
                   end: str | None = None, start_ms: int | None = None, end_ms: int | None = None,
                   history: pl.DataFrame | None = None, notes: tuple[str, ...] = ()) -> Traffic:
    """Stored requests already read for a trace and window (start and end as the user wrote them), and those
    stored before the window, if read; notes say how the trace was picked."""
    what = f"stored requests{f' of trace {trace!r}' if trace else ''}" + (
        f" from {start}" if start else "") + (f" until {end}" if end else "")
    if frame.height == 0:
        raise ReplayError(f"no {what}; load some with 'hetpool ingest traffic PATH' or pass --traffic")
    spec = {"kind": "stored", "trace": trace, "start_ms": start_ms, "end_ms": end_ms}
    first, last = frame["arrival_ms"].min(), frame["arrival_ms"].max()
    return Traffic(frame, f"{what} ({frame.height:,} requests arriving {_day(int(first))} to "  # type: ignore[arg-type]
                          f"{_day(int(last))} UTC)", notes, spec=spec,  # type: ignore[arg-type]
                   history=history if history is not None and history.height else None)


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
    oracle_result: ReplayResult | None = None  # the candidate replayed with the oracle predictor, when asked
    history: int = 0                           # requests before the traffic the predictor started from

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

    @property
    def oracle_summary(self) -> Summary | None:
        """The candidate's summary with the oracle predictor, when the gap was asked for."""
        return self.oracle_result.summary if self.oracle_result else None

    @property
    def used_oracle(self) -> bool:
        """Whether any number shown comes from a run that read the true output lengths."""
        runs = [self.summary, self.base_summary, self.oracle_summary]
        return any(s is not None and s.predictor_note for s in runs)

    def notes(self) -> list[str]:
        """What every face must say with these numbers."""
        return [ORACLE_NOTE] if self.used_oracle else []

    def oracle_gap(self) -> dict[str, Any] | None:
        """What the oracle predictor changes against the candidate's own: busy cost, p99 TTFT, SLA violations."""
        o = self.oracle_summary
        if o is None:
            return None
        s = self.summary

        def pct(a: float | None, b: float | None) -> float | None:
            return None if a is None or b is None or a == 0 else (b - a) / a * 100.0

        return {"predictor": s.predictor, "note": ORACLE_NOTE,
                "busy_cost_usd": {"predictor": s.busy_cost_usd, "oracle": o.busy_cost_usd,
                                  "change_pct": pct(s.busy_cost_usd, o.busy_cost_usd)},
                "ttft_p99": {"predictor": s.ttft_p99, "oracle": o.ttft_p99, "change_pct": pct(s.ttft_p99, o.ttft_p99)},
                "sla_violation_rate": {"predictor": s.sla_violation_rate, "oracle": o.sla_violation_rate,
                                       "change_pts": (o.sla_violation_rate - s.sla_violation_rate) * 100.0}}

    def data(self) -> dict[str, Any]:
        """Everything the run says, as plain data (the CLI's --json output, without the run id)."""
        out: dict[str, Any] = {"traffic": self.traffic, "candidate": self.summary.to_dict(),
                               "baseline": self.base_summary.to_dict() if self.base_summary else None,
                               "notes": self.notes(), "history_requests": self.history}
        if self.verdict:
            out.update(verdict=self.verdict.verdict, reasons=self.verdict.reasons,
                       checks=[c.__dict__ for c in self.verdict.checks])
        gap = self.oracle_gap()
        if gap is not None and self.oracle_summary is not None:
            out["oracle_gap"] = {**gap, "oracle": self.oracle_summary.to_dict()}
        return out

    def report_lines(self) -> list[str]:
        """The comparison table, the gate's checks and the oracle gap, as the CLI prints them."""
        runs = [(self.candidate.name[:17], self.summary)]
        if self.baseline and self.base_summary:
            runs.append((self.baseline.name[:17], self.base_summary))
        lines = summary_lines(runs)
        if self.verdict:
            lines.append(f"gate: {self.verdict.verdict.upper()}")
            lines += [f"  {'ok  ' if c.passed else 'FAIL'} {c.message}" for c in self.verdict.checks]
        lines += gap_lines(self.oracle_gap())
        lines += [f"note: {n}" for n in self.notes()]
        return lines

    def run_record(self, name: str | None = None, note: str | None = None) -> dict[str, Any]:
        """The keyword arguments that save this run in `replay_runs`."""
        return {"candidate": candidate_to_dict(self.candidate),
                "baseline": candidate_to_dict(self.baseline) if self.baseline else None,
                "traffic": self.traffic, "seed": self.seed, "summary": self.summary.to_dict(),
                "baseline_summary": self.base_summary.to_dict() if self.base_summary else None,
                "oracle_summary": self.oracle_summary.to_dict() if self.oracle_summary else None,
                "verdict": self.verdict.verdict if self.verdict else None,
                "reasons": self.verdict.reasons if self.verdict else [], "name": name, "note": note,
                "traffic_spec": self.traffic_spec or None,
                "gate": {k: v for k, v in self.gate.__dict__.items() if v is not None} if self.gate else None}


def run_whatif(candidate: Candidate, traffic: Traffic, registry: Registry, *, baseline: Candidate | None = None,
               gate: Gate | None = None, seed: int = 0, progress: Progress | None = None,
               oracle_gap: bool = False) -> WhatIf:
    """Replay the candidate (and the baseline, and with oracle_gap the candidate with the oracle predictor) on
    the traffic with one seed; gate when a gate and a baseline are given. Pure: the result depends only on the
    arguments."""
    if gate is not None and baseline is None:
        raise ReplayError("a gate compares against a baseline; give a baseline too")
    say = progress or (lambda share, what: None)
    knowing = candidate.predictor.name == "oracle"
    steps = 1 + (baseline is not None) + (oracle_gap and not knowing)
    pools = resolve_pools(registry, candidate)
    base_pools = resolve_pools(registry, baseline) if baseline else ()
    history = traffic.history
    say(0.0, f"replaying {traffic.frame.height:,} requests under {candidate.name!r}")
    telemetry = traffic.telemetry
    result = run_replay(candidate, traffic.frame, registry, seed, history, telemetry)
    base = None
    if baseline:
        say(1 / steps, f"replaying the same requests under the baseline {baseline.name!r}")
        base = run_replay(baseline, traffic.frame, registry, seed, history, telemetry)
    oracle = None
    if oracle_gap:
        if knowing:
            oracle = result
        else:
            say((steps - 1) / steps, f"replaying {candidate.name!r} again with the oracle predictor")
            oracle = run_replay(dataclasses.replace(candidate, predictor=PredictorSpec("oracle")), traffic.frame,
                                registry, seed, telemetry=telemetry)
    verdict = evaluate(gate, base.summary, result.summary) if gate and base else None
    say(1.0, "done")
    return WhatIf(traffic=traffic.described, seed=seed, candidate=candidate, result=result, pools=pools,
                  baseline=baseline, base_result=base, base_pools=base_pools, gate=gate, verdict=verdict,
                  traffic_spec=traffic.spec, oracle_result=oracle, history=history.height if history is not None
                  else 0)


def fmt_s(v: float | None, unit: str = "s", none: str = "-") -> str:
    """Seconds with three decimals, or `none` when there is no value."""
    return none if v is None else f"{v:.3f}{unit}"


def fmt_ms(v: float | None, unit: str = "", none: str = "-") -> str:
    """Seconds shown as milliseconds with one decimal, or `none`."""
    return none if v is None else f"{v * 1000:.1f}{unit}"


def fmt_ratio(v: float | None) -> str:
    """A ratio as '0.42x', '1.9x', '12x', or '-'."""
    return "-" if v is None else f"{v:.0f}x" if v >= 10 else f"{v:.2g}x"


def predictor_said(s: Summary) -> str:
    """The predictor's error in words: off by how many tokens, predicted over true, and which way it leans."""
    if s.predictor == "oracle" or s.predictor_err_tokens_p50 is None:
        return s.predictor
    ratio = s.predictor_ratio_p50 or 1.0
    lean = ("it predicts long" if ratio > 1.05 else "it predicts short" if ratio < 0.95 else
            "no lean at the median")
    bias = s.predictor_bias_tokens or 0.0
    return (f"{s.predictor}: off by {s.predictor_err_tokens_p50:,.0f} output tokens at the median and "
            f"{s.predictor_err_tokens_p90:,.0f} at p90; predicted / true {fmt_ratio(s.predictor_ratio_p50)} at the "
            f"median ({fmt_ratio(s.predictor_ratio_p10)} at p10, {fmt_ratio(s.predictor_ratio_p90)} at p90): {lean}, "
            f"by {bias:+,.0f} tokens on average")


OVERFLOW_SAID = ("overflow counts the requests no pool could take within their SLA when they arrived: queued ones "
                 "waited on the replica predicted to finish them first (the candidate's overflow: queue), degraded "
                 "ones were served outside their tier and count as SLA misses (overflow: degrade), rejected ones were "
                 "not served (no pool holds their model and prompt, or overflow: reject)")


def overflow_said(s: Summary) -> str:
    """A run's overflow in words, or '' when it had none."""
    q, d, r = s.overflow["queue"], s.overflow["degrade"], s.overflow["reject"]
    if not q + d + r:
        return ""
    return f"{q:,} queued, {d:,} served degraded, {r:,} rejected, of {s.requests:,} requests"


def gap_lines(gap: dict[str, Any] | None) -> list[str]:
    """The oracle gap as the CLI prints it: each measure with the candidate's predictor, with the oracle, and
    the change."""
    if gap is None:
        return []

    def change(v: float | None, unit: str) -> str:
        return "-" if v is None else f"{v:+.2f}{unit}"

    cost, p99, viol = gap["busy_cost_usd"], gap["ttft_p99"], gap["sla_violation_rate"]
    return [f"oracle gap: what knowing every output length would change ({gap['predictor']} -> oracle; "
            f"{gap['note']})",
            f"  {'busy cost':<16}{'$' + format(cost['predictor'], ',.2f'):>14} -> "
            f"{'$' + format(cost['oracle'], ',.2f'):<14}{change(cost['change_pct'], '%')}",
            f"  {'ttft p99':<16}{fmt_s(p99['predictor']):>14} -> {fmt_s(p99['oracle']):<14}"
            f"{change(p99['change_pct'], '%')}",
            f"  {'sla violations':<16}{viol['predictor'] * 100:>13.2f}% -> {viol['oracle'] * 100:.2f}%"
            f"{'':<8}{change(viol['change_pts'], ' points')}"]


def fmt_share(value: float | None) -> str:
    """A share as a percentage with one decimal, '-' when there is none."""
    return "-" if value is None else f"{value * 100:.1f}%"


def summary_lines(runs: list[tuple[str, Summary]]) -> list[str]:
    """Summaries side by side, one column per run (the text of `hetpool replay run`)."""
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
        ("overflow: queued", lambda s: str(s.overflow["queue"])),
        ("overflow: degraded", lambda s: str(s.overflow["degrade"])),
        ("predictor", lambda s: s.predictor[:17]),
        ("out error p50/p90", lambda s: "-" if s.predictor_err_tokens_p50 is None else
         f"{s.predictor_err_tokens_p50:,.0f}/{s.predictor_err_tokens_p90:,.0f} tok"),
        ("pred/true p10/50/90", lambda s: "-" if s.predictor_ratio_p50 is None else
         "/".join(fmt_ratio(v).rstrip("x") for v in (s.predictor_ratio_p10, s.predictor_ratio_p50,
                                                     s.predictor_ratio_p90)) + "x"),
        ("pred - true, mean", lambda s: "-" if s.predictor_bias_tokens is None else
         f"{s.predictor_bias_tokens:+,.0f} tok"),
    ]
    if any(s.faults for _, s in runs):
        rows += [("failures injected", lambda s: str(sum(s.failures.values()))),
                 ("retried / missed SLA", lambda s: f"{s.retried}/{s.retries_missed_sla}"),
                 ("work lost", lambda s: f"{s.work_lost_tokens:,} tok")]
    table = [(label, [get(s) for _, s in runs]) for label, get in rows]

    def per_pool(label: str, get: Callable[[PoolSummary], str]) -> None:
        for pool in runs[0][1].pools:  # a pool a run left out (disabled) reads "-" in its column
            table.append((f"{label} {pool}", [get(s.pools[pool]) if pool in s.pools else "-" for _, s in runs]))

    for pool in runs[0][1].utilization:
        table.append((f"util / kv {pool}", [f"{s.utilization.get(pool, 0.0) * 100:.1f}% /"
                                            f"{s.kv_use.get(pool, 0.0) * 100:>4.0f}%" for _, s in runs]))
    per_pool("kv p95 / peak", lambda p: f"{fmt_share(p.kv_p95)} / {fmt_share(p.kv_peak)}")
    table.append(("prefix reuse", [fmt_share(s.reuse) for _, s in runs]))
    per_pool("reuse / evicted", lambda p: f"{fmt_share(p.reuse)} / {p.blocks_evicted:,}")
    per_pool("saved ttft/cost", lambda p: f"{fmt_s(p.ttft_saved_s)} / ${p.busy_cost_saved_usd:,.2f}")
    if any(s.ttft_split for _, s in runs):  # traffic with images: TTFT in its parts, and each pool's encoder
        table.append(("ttft encode/queue/pf", ["/".join(fmt_s(s.ttft_split.get(k)) for k in
                                                         ("encode_s", "queue_s", "prefill_s")) for _, s in runs]))
        per_pool("encoder s / share", lambda p: f"{fmt_s(p.encode_s)} / {fmt_share(p.encode_share)}")
    # the columns as wide as their widest cell, so that a long pool name or value never runs into the next
    label_w = max(22, 1 + max(len(label) for label, _ in table))
    cell_w = max(18, 1 + max((len(v) for _, values in table for v in values), default=0),
                 1 + max(len(name) for name, _ in runs))
    lines = [" " * label_w + "".join(f"{name:>{cell_w}}" for name, _ in runs)]
    lines += [f"{label:<{label_w}}" + "".join(f"{v:>{cell_w}}" for v in values) for label, values in table]
    lines += sorted({f"note: {REUSE_SAID[s.reuse_source]}" for _, s in runs if s.reuse_source in REUSE_SAID})
    if any(overflow_said(s) for _, s in runs):
        lines.append(f"note: {OVERFLOW_SAID}")
    lines += [f"note: {name.strip()}'s predictor, {predictor_said(s)}" for name, s in runs
              if s.predictor_err_tokens_p50 is not None]
    return lines
