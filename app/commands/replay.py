"""hetpool replay run|calibrate|sweep|bench: what-if replays of request traffic, the gate, calibration, benchmarks."""

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
    Candidate,
    Summary,
    calibrate,
    calibrated_candidate,
    candidate_to_dict,
    closed_loop,
    default_requests,
    evaluate,
    expand,
    load_candidate,
    load_gate,
    load_grid,
    read_bench_table,
    read_traffic,
    run_replay,
    run_sweep,
)
from replay.errors import ReplayError
from replay.fleet import resolve_pools
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
    p = add_command(group, "calibrate", help="fit each pool's mfu, mem_bw_eff and step overhead from observed "
                                             "latencies and/or a benchmark table",
                    example="hetpool replay calibrate --trace observed.csv --bench bench.csv "
                            "--base examples/candidates/sla_cost.yaml --out calibrated.yaml",
                    handler=calibrate_cmd, common=common)
    p.add_argument("--out", required=True, metavar="FILE", help="candidate YAML to write the fit to")
    p.add_argument("--bench", metavar="FILE", help="CSV of closed-loop benchmarks: pool,isl,osl,concurrency,"
                                                   "ttft_ms,tpot_ms[,output_tok_s]")
    p.add_argument("--base", metavar="CANDIDATE", help="write the fit over this candidate (default: a candidate "
                                                       "that replays the observed routing)")
    p.add_argument("--no-requests", action="store_true", help="fit from --bench alone, ignoring stored requests")
    _source_options(p)
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
    p = add_command(group, "bench", help="closed-loop benchmark of one replica of a pool at fixed concurrency, "
                                         "as vllm bench serve --max-concurrency",
                    example="hetpool replay bench --pool h100-a --concurrency 1,8,32 --isl 1024 --osl 128",
                    handler=bench_cmd, common=common)
    p.add_argument("--pool", required=True, help="pool id")
    p.add_argument("--concurrency", required=True, type=_int_list, metavar="N[,N...]", help="clients at once")
    p.add_argument("--isl", required=True, type=int, metavar="N", help="prompt tokens per request")
    p.add_argument("--osl", required=True, type=int, metavar="N", help="output tokens per request")
    p.add_argument("--requests", type=int, metavar="N",
                   help="requests per concurrency (default: 10 per client, at least 100)")
    p.add_argument("--candidate", metavar="FILE", help="candidate whose overrides apply to the pool")


def _int_list(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected whole numbers separated by commas, got {text!r}") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected whole numbers >= 1, got {text!r}")
    return values


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
        ("busy cost", lambda s: f"${s.busy_cost_usd:,.2f}"),
        ("provisioned cost", lambda s: f"${s.provisioned_cost_usd:,.2f}"),
        ("busy cost per Mtok", lambda s: "-" if s.cost_per_mtok is None else f"${s.cost_per_mtok:,.4f}"),
        ("ttft p50/p99", lambda s: f"{_fmt(s.ttft_p50)}/{_fmt(s.ttft_p99)}"),
        ("tpot p50/p99 ms", lambda s: f"{_ms(s.tpot_p50)}/{_ms(s.tpot_p99)}"),
        ("e2e p50/p99", lambda s: f"{_fmt(s.e2e_p50)}/{_fmt(s.e2e_p99)}"),
        ("sla violations", lambda s: f"{s.sla_violation_rate * 100:.2f}%"),
        ("overflow q/d/r", lambda s: f"{s.overflow['queue']}/{s.overflow['degrade']}/{s.overflow['reject']}"),
    ]
    lines = [head] + [f"{label:<22}" + "".join(f"{get(s):>18}" for _, s in runs) for label, get in rows]
    for pool in runs[0][1].utilization:
        lines.append(f"{'util / kv ' + pool:<22}" + "".join(
            f"{s.utilization.get(pool, 0.0) * 100:>10.1f}% /{s.kv_use.get(pool, 0.0) * 100:>4.0f}%" for _, s in runs))
    return lines


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v * 1000:.1f}"


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
    """Fit coefficients from observations and/or a benchmark table and write them as a candidate file."""
    args = ctx.args
    bench = read_bench_table(args.bench) if args.bench else None
    with ctx.store().read() as con:
        registry = _registry(con)
        base = load_candidate(args.base, registry) if args.base else None
        if args.no_requests and bench is None:
            raise UsageError("--no-requests fits from a benchmark table alone; pass --bench FILE")
        traffic, described = (None, "") if args.no_requests else _traffic(ctx, con)
    fits, unknown = calibrate(traffic, registry, bench=bench, base=base)
    body = calibrated_candidate(fits, name=Path(args.out).stem, base=candidate_to_dict(base) if base else None)
    sources = [s for s in (described, f"benchmark table {args.bench}" if args.bench else "") if s]
    header = [f"# Calibrated from {' and '.join(sources)}."]
    for f in fits:
        header.append(f"# {f.pool}: mfu {_fmt(f.mfu, '')}, mem_bw_eff {_fmt(f.mem_bw_eff, '')}, step overhead "
                      f"{_fmt(f.step_overhead_ms, ' ms')}; TTFT MAPE {_fmt(f.ttft_mape, '')} R2 {_fmt(f.ttft_r2, '')}"
                      f", TPOT MAPE {_fmt(f.tpot_mape, '')} R2 {_fmt(f.tpot_r2, '')} (n={f.n_ttft}, bench "
                      f"rows {f.n_bench})")
    Path(args.out).write_text("\n".join(header) + "\n" + yaml.safe_dump(body, sort_keys=False))
    lines = [f"{'pool':<12} {'n':>6} {'bench':>5} {'mfu':>6} {'mem_bw':>6} {'ovh ms':>7} {'ttft MAPE':>9} "
             f"{'R2':>6} {'tpot MAPE':>9} {'R2':>6}"]
    for f in fits:
        lines.append(f"{f.pool:<12} {f.n_ttft:>6} {f.n_bench:>5} {_fmt(f.mfu, ''):>6} {_fmt(f.mem_bw_eff, ''):>6} "
                     f"{_fmt(f.step_overhead_ms, ''):>7} {_fmt(f.ttft_mape, ''):>9} {_fmt(f.ttft_r2, ''):>6} "
                     f"{_fmt(f.tpot_mape, ''):>9} {_fmt(f.tpot_r2, ''):>6}")
        lines += [f"  note: {n}" for n in f.notes]
    lines += [f"skipped {n} requests observed on pool {p!r}, which the fleet does not serve"
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
    table = run_sweep(points, traffic, registry, args.seed, args.workers).sort("busy_cost_usd")
    if args.out:
        table.write_csv(args.out)
    params = [n for n, _ in grid.parameters]
    lines = ["  ".join(f"{p:>14}" for p in [*params, "busy cost", "provisioned", "ttft_p99", "sla_viol",
                                                "pareto"])]
    for row in table.iter_rows(named=True):
        cells = [str(row[p]) for p in params] + [
            f"${row['busy_cost_usd']:,.2f}", f"${row['provisioned_cost_usd']:,.2f}", _fmt(row["ttft_p99"]),
            f"{row['sla_violation_rate'] * 100:.2f}%", "*" if row["pareto"] else ""]
        lines.append("  ".join(f"{c:>14}" for c in cells))
    ctx.emit({"traffic": described, "points": table.to_dicts()}, "\n".join(lines))
    return 0


def bench_cmd(ctx: Context) -> int:
    """Run the closed-loop benchmark on one replica of a pool at each concurrency."""
    args = ctx.args
    with ctx.store().read() as con:
        registry = _registry(con)
        candidate = load_candidate(args.candidate, registry) if args.candidate else None
    pools = {p.id: p for p in resolve_pools(registry, candidate or Candidate(name="bench"))}
    if args.pool not in pools:
        raise UsageError(f"unknown pool {args.pool!r}; replayable: {', '.join(pools)}")
    spec = pools[args.pool]
    if args.requests is not None and args.requests < 1:
        raise UsageError(f"--requests must be >= 1, got {args.requests}")
    points = [closed_loop(spec, c, args.isl, args.osl, args.requests or default_requests(c))
              for c in args.concurrency]
    lines = [f"{spec.id}: one replica of {spec.devices_per_replica} x {spec.chip.name} (pp {spec.pp}), "
             f"{spec.model.id}, isl {args.isl}, osl {args.osl}",
             f"{'concurrency':>11} {'ttft p50':>9} {'ttft p99':>9} {'tpot p50':>9} {'tpot p99':>9} "
             f"{'output tok/s':>12} {'req/s':>7}   (ms)"]
    for p in points:
        lines.append(f"{p.concurrency:>11} {p.ttft_ms_p50:>9.1f} {p.ttft_ms_p99:>9.1f} {_num(p.tpot_ms_p50):>9} "
                     f"{_num(p.tpot_ms_p99):>9} {p.output_tok_s:>12.1f} {p.req_s:>7.2f}")
    ctx.emit([p.__dict__ for p in points], "\n".join(lines))
    return 0


def _num(v: float | None) -> str:
    return "-" if v is None else f"{v:.1f}"
