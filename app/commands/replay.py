"""hetpool replay run|calibrate|sweep: what-if replays of request traffic, the regression gate, calibration."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import yaml

from app.commands._base import Context, add_command, add_group
from app.commands.ingest_traffic import add_traffic_options, parse_options, parse_time
from app.errors import UsageError
from pool_registry import Registry
from replay import (
    Summary,
    calibrate,
    calibrated_candidate,
    candidate_to_dict,
    evaluate,
    expand,
    load_candidate,
    load_gate,
    load_grid,
    read_traffic,
    run_replay,
    run_sweep,
)
from replay.errors import ReplayError
from store import require_registry
from store.replay_runs import save_replay_run
from store.requests import read_requests

GATE_FAILED = 1


def _source_options(p: argparse.ArgumentParser, *, file: bool = True) -> None:
    if file:
        p.add_argument("--traffic", metavar="PATH", help="replay this trace file instead of stored requests")
        add_traffic_options(p)
    p.add_argument("--trace", help="stored trace name to use (default: all stored requests)")
    p.add_argument("--start", metavar="ISO", help="first arrival of stored requests to use (inclusive)")
    p.add_argument("--end", metavar="ISO", help="end of the stored-request window (exclusive)")


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """Add the replay command group."""
    group = add_group(sub, "replay", help="replay traffic against candidate routing and cost models")
    p = add_command(group, "run", help="replay traffic under a candidate (and a baseline), optionally gated",
                    example="hetpool replay run --candidate examples/candidates/sla_cost.yaml "
                            "--baseline examples/candidates/round_robin.yaml --gate examples/gate.yaml",
                    handler=run, common=common)
    p.add_argument("--candidate", required=True, metavar="FILE", help="candidate YAML")
    p.add_argument("--baseline", metavar="FILE", help="baseline candidate YAML, replayed on the same traffic")
    p.add_argument("--gate", metavar="FILE", help="gate YAML; exit 1 when the candidate fails it")
    p.add_argument("--seed", type=int, default=0, help="RNG seed of the run (default 0)")
    p.add_argument("--out", metavar="DIR", help="write requests Parquet, summary and verdict JSON here")
    _source_options(p)
    p = add_command(group, "calibrate", help="fit each pool's mfu and mem_bw_eff from observed latencies",
                    example="hetpool replay calibrate --trace observed.csv --out calibrated.yaml",
                    handler=calibrate_cmd, common=common)
    p.add_argument("--out", required=True, metavar="FILE", help="candidate YAML to write the fit to")
    _source_options(p, file=False)
    p = add_command(group, "sweep", help="replay a grid of candidate variations in parallel; print the "
                                         "cost / p99 TTFT Pareto front",
                    example="hetpool replay sweep --candidate examples/candidates/sla_cost.yaml "
                            "--grid examples/grid.yaml --workers 2", handler=sweep_cmd, common=common)
    p.add_argument("--candidate", required=True, metavar="FILE", help="base candidate YAML")
    p.add_argument("--grid", required=True, metavar="FILE", help="grid YAML")
    p.add_argument("--workers", type=int, default=1, help="parallel processes (default 1)")
    p.add_argument("--seed", type=int, default=0, help="RNG seed of every point (default 0)")
    p.add_argument("--out", metavar="FILE", help="also write the table as CSV")
    _source_options(p)


def _traffic(ctx: Context, con: duckdb.DuckDBPyConnection) -> tuple[pl.DataFrame, str]:
    args = ctx.args
    if getattr(args, "traffic", None):
        if args.trace or args.start or args.end:
            raise UsageError("--traffic replays a file; --trace, --start and --end select stored requests")
        fmt, parsed = read_traffic(args.traffic, args.format, parse_options(args))
        if parsed.rejects.height:
            ctx.note(f"{args.traffic}: {parsed.rejects.height} rows rejected, first: "
                     f"line {parsed.rejects['line'][0]}: {parsed.rejects['reason'][0]}")
        return parsed.frame, f"file {args.traffic} ({fmt}, {parsed.frame.height} requests)"
    start = parse_time(args.start, "--start") if args.start else None
    end = parse_time(args.end, "--end") if args.end else None
    frame = read_requests(con, trace=args.trace, start_ms=start, end_ms=end)
    what = f"stored requests{f' of trace {args.trace!r}' if args.trace else ''}" + (
        f" from {args.start}" if args.start else "") + (f" until {args.end}" if args.end else "")
    if frame.height == 0:
        raise ReplayError(f"no {what}; load some with 'hetpool ingest traffic PATH' or pass --traffic")
    return frame, f"{what} ({frame.height} requests)"


def _fmt(v: float | None, unit: str = "s") -> str:
    return "-" if v is None else f"{v:.3f}{unit}"


def _summary_lines(runs: list[tuple[str, Summary]]) -> list[str]:
    head = f"{'':<22}" + "".join(f"{name:>18}" for name, _ in runs)
    rows = [
        ("requests", lambda s: str(s.requests)), ("served", lambda s: str(s.served)),
        ("rejected", lambda s: str(s.rejected)), ("still queued", lambda s: str(s.still_queued)),
        ("cost", lambda s: f"${s.cost_usd:,.2f}"), ("provisioned cost", lambda s: f"${s.provisioned_cost_usd:,.2f}"),
        ("cost per Mtok", lambda s: "-" if s.cost_per_mtok is None else f"${s.cost_per_mtok:,.4f}"),
        ("ttft p50/p99", lambda s: f"{_fmt(s.ttft_p50)}/{_fmt(s.ttft_p99)}"),
        ("e2e p50/p99", lambda s: f"{_fmt(s.e2e_p50)}/{_fmt(s.e2e_p99)}"),
        ("sla violations", lambda s: f"{s.sla_violation_rate * 100:.2f}%"),
        ("overflow q/d/r", lambda s: f"{s.overflow['queue']}/{s.overflow['degrade']}/{s.overflow['reject']}"),
    ]
    lines = [head] + [f"{label:<22}" + "".join(f"{get(s):>18}" for _, s in runs) for label, get in rows]
    for pool in runs[0][1].utilization:
        lines.append(f"{'util ' + pool:<22}" + "".join(
            f"{s.utilization.get(pool, 0.0) * 100:>17.1f}%" for _, s in runs))
    return lines


def _registry(con: duckdb.DuckDBPyConnection) -> Registry:
    return require_registry(con)


def run(ctx: Context) -> int:
    """Replay, compare, gate, save; exit 1 when the gate fails."""
    args = ctx.args
    if args.gate and not args.baseline:
        raise UsageError("--gate compares against a baseline; pass --baseline FILE too")
    store = ctx.store()
    with store.read() as con:
        registry = _registry(con)
        candidate = load_candidate(args.candidate, registry)
        baseline = load_candidate(args.baseline, registry) if args.baseline else None
        gate = load_gate(args.gate) if args.gate else None
        traffic, described = _traffic(ctx, con)
    ctx.note(f"replaying {described} under {candidate.name!r}")
    result = run_replay(candidate, traffic, registry, args.seed)
    base = run_replay(baseline, traffic, registry, args.seed) if baseline else None
    verdict = evaluate(gate, base.summary, result.summary) if gate and base else None
    with store.transaction("hetpool replay run") as con:
        run_id = save_replay_run(
            con, candidate=candidate_to_dict(candidate),
            baseline=candidate_to_dict(baseline) if baseline else None, traffic=described, seed=args.seed,
            summary=result.summary.to_dict(), baseline_summary=base.summary.to_dict() if base else None,
            verdict=verdict.verdict if verdict else None, reasons=verdict.reasons if verdict else [])
    data: dict[str, Any] = {"run_id": run_id, "traffic": described, "candidate": result.summary.to_dict(),
                            "baseline": base.summary.to_dict() if base else None}
    if verdict:
        data.update(verdict=verdict.verdict, reasons=verdict.reasons,
                    checks=[c.__dict__ for c in verdict.checks])
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        result.requests.write_parquet(out / "requests.parquet")
        if base:
            base.requests.write_parquet(out / "baseline_requests.parquet")
        (out / "summary.json").write_text(json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")
    runs = [(candidate.name[:17], result.summary)] + ([(baseline.name[:17], base.summary)]
                                                      if baseline and base else [])
    lines = [f"replay run {run_id}: {described}", *_summary_lines(runs)]
    if verdict:
        lines.append(f"gate: {verdict.verdict.upper()}")
        lines += [f"  {'ok  ' if c.passed else 'FAIL'} {c.message}" for c in verdict.checks]
    ctx.emit(data, "\n".join(lines))
    return GATE_FAILED if verdict and not verdict.passed else 0


def calibrate_cmd(ctx: Context) -> int:
    """Fit coefficients from stored observations and write them as a candidate file."""
    args = ctx.args
    with ctx.store().read() as con:
        registry = _registry(con)
        traffic, described = _traffic(ctx, con)
    fits, unknown = calibrate(traffic, registry)
    body = calibrated_candidate(fits, name=Path(args.out).stem)
    header = [f"# Calibrated from {described}."]
    for f in fits:
        header.append(f"# {f.pool}: mfu {_fmt(f.mfu, '')} (TTFT MAPE {_fmt(f.ttft_mape, '')}, n={f.n_ttft}), "
                      f"mem_bw_eff {_fmt(f.mem_bw_eff, '')} (TPOT MAPE {_fmt(f.tpot_mape, '')}, n={f.n_decode})")
    Path(args.out).write_text("\n".join(header) + "\n" + yaml.safe_dump(body, sort_keys=False))
    lines = [f"{'pool':<12} {'n':>7} {'mfu':>7} {'ttft MAPE':>10} {'R2':>7} {'mem_bw_eff':>10} "
             f"{'tpot MAPE':>10} {'R2':>7}"]
    for f in fits:
        lines.append(f"{f.pool:<12} {f.n_ttft:>7} {_fmt(f.mfu, ''):>7} {_fmt(f.ttft_mape, ''):>10} "
                     f"{_fmt(f.ttft_r2, ''):>7} {_fmt(f.mem_bw_eff, ''):>10} {_fmt(f.tpot_mape, ''):>10} "
                     f"{_fmt(f.tpot_r2, ''):>7}")
        lines += [f"  note: {n}" for n in f.notes]
    lines += [f"skipped {n} requests observed on pool {p!r}, which the fleet does not have"
              for p, n in unknown.items()]
    lines.append(f"wrote {args.out}")
    ctx.emit({"out": args.out, "fits": [f.__dict__ for f in fits], "unknown_pools": unknown}, "\n".join(lines))
    return 0


def sweep_cmd(ctx: Context) -> int:
    """Expand the grid over the base candidate, replay every point, mark the Pareto front."""
    args = ctx.args
    if args.workers < 1:
        raise UsageError(f"--workers must be >= 1, got {args.workers}")
    with ctx.store().read() as con:
        registry = _registry(con)
        base = load_candidate(args.candidate, registry)
        grid = load_grid(args.grid, registry)
        traffic, described = _traffic(ctx, con)
    points = expand(grid, base)
    ctx.note(f"sweeping {len(points)} candidates over {described} on {args.workers} worker(s)")
    table = run_sweep(points, traffic, registry, args.seed, args.workers).sort("cost_usd")
    if args.out:
        table.write_csv(args.out)
    params = [n for n, _ in grid.parameters]
    lines = ["  ".join(f"{p:>14}" for p in [*params, "cost_usd", "ttft_p99", "sla_viol", "pareto"])]
    for row in table.iter_rows(named=True):
        cells = [str(row[p]) for p in params] + [
            f"{row['cost_usd']:.2f}", _fmt(row["ttft_p99"]), f"{row['sla_violation_rate'] * 100:.2f}%",
            "*" if row["pareto"] else ""]
        lines.append("  ".join(f"{c:>14}" for c in cells))
    ctx.emit({"traffic": described, "points": table.to_dicts()}, "\n".join(lines))
    return 0
