"""hetpool replay run|calibrate|sweep|bench: what-if replays of request traffic, the gate, calibration, benchmarks."""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.commands._base import Context, add_command, add_group, duration_ms
from app.commands._choices import BENCH_ARRIVALS, BENCH_RANGE_STYLES, SWEEP_EXECUTORS
from app.commands.ingest_traffic import add_traffic_options, parse_options, parse_time
from app.exceptions import UsageError

if TYPE_CHECKING:
    import duckdb

    from replay import Candidate
    from replay.runway.breaking import Runway
    from replay.whatif import Traffic

# Each handler imports the layers it uses, so that `hetpool replay ... --help` loads none of them (the replay
# package brings Polars and SciPy, the store DuckDB).

GATE_FAILED = 1


def _source_options(p: argparse.ArgumentParser, *, file: bool = True) -> None:
    if file:
        p.add_argument("--traffic", metavar="PATH", help="replay this trace file instead of stored requests")
        add_traffic_options(p)
    p.add_argument("--trace", help="stored trace to use (default: the one with the newest requests; the output "
                                   "names it and the others)")
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
    p.add_argument("--oracle-gap", action="store_true",
                   help="also replay the candidate with the oracle predictor (the true output lengths) and report "
                        "what perfect knowledge would change: an upper bound, not achievable by a router")
    _source_options(p)
    p = add_command(group, "calibrate", help="fit each chip and engine's step-model coefficients (mfu, mem_bw_eff, "
                                             "overheads, collective latency) from observed latencies and/or a "
                                             "benchmark table, and say which the evidence identifies",
                    example="hetpool replay calibrate --trace observed.csv --bench bench.csv "
                            "--base examples/candidates/sla_cost.yaml --out calibrated.yaml",
                    handler=calibrate_cmd, common=common)
    p.add_argument("--out", required=True, metavar="FILE", help="candidate YAML to write the fit to")
    p.add_argument("--bench", metavar="FILE", help="CSV of closed-loop benchmarks: pool,isl,osl,concurrency,"
                                                   "ttft_ms,tpot_ms[,output_tok_s]")
    p.add_argument("--base", metavar="CANDIDATE", help="write the fit over this candidate (default: a candidate "
                                                       "that replays the observed routing)")
    p.add_argument("--no-requests", action="store_true", help="fit from --bench alone, ignoring stored requests")
    p.add_argument("--carry", action="store_true", help="also give pools on chips without evidence the fit of a "
                                                        "pool of the same engine, through the chips' datasheets")
    p.add_argument("--pool", action="append", default=[], metavar="ID",
                   help="fit this pool alone, from its own evidence (repeatable; default: every pool)")
    _source_options(p)
    p = add_command(group, "sweep", help="replay a grid of candidate variations in parallel; print the "
                                         "cost / p99 TTFT Pareto front",
                    example="hetpool replay sweep --candidate examples/candidates/sla_cost.yaml "
                            "--grid examples/grid.yaml --workers 2", handler=sweep_cmd, common=common)
    p.add_argument("--candidate", required=True, metavar="FILE", help="base candidate YAML")
    p.add_argument("--grid", required=True, metavar="FILE", help="grid YAML")
    p.add_argument("--workers", type=int, default=1, help="parallel processes (default 1; the process executor)")
    p.add_argument("--executor", choices=SWEEP_EXECUTORS, default="process",
                   help="where the points run: local processes (default) or a Ray cluster")
    p.add_argument("--address", metavar="ADDR", help="Ray cluster to join, as host:port or ray://host:port "
                                                     "(default with --executor ray: a local cluster for this sweep)")
    p.add_argument("--seed", type=int, default=0, help="RNG seed of every point (default 0)")
    p.add_argument("--out", metavar="FILE", help="also write the table as CSV")
    _source_options(p)
    p = add_command(group, "bench", help="closed-loop benchmark of one replica of a pool at fixed concurrency, "
                                         "as vllm bench serve --max-concurrency N --num-prompts M",
                    example="hetpool replay bench --pool h100-a --concurrency 1,8,32 --isl 1024 --osl 128 "
                            "--num-prompts 200 --random-range-ratio 0.1",
                    handler=bench_cmd, common=common)
    p.add_argument("--pool", required=True, help="pool id")
    p.add_argument("--concurrency", required=True, type=_int_list, metavar="N[,N...]",
                   help="clients, each with at most one request outstanding (vLLM's --max-concurrency)")
    p.add_argument("--isl", required=True, type=int, metavar="N", help="prompt tokens per request")
    p.add_argument("--osl", required=True, type=int, metavar="N", help="output tokens per request")
    p.add_argument("--num-prompts", "--requests", dest="requests", type=int, metavar="N",
                   help="measured requests per concurrency, all the clients' together (default: 10 per client, "
                        "at least 100)")
    p.add_argument("--num-warmups", type=int, default=0, metavar="N",
                   help="requests the clients send first, not measured (default 0)")
    p.add_argument("--random-range-ratio", type=float, default=0.0, metavar="R",
                   help="draw each request's lengths uniformly from [isl (1 - R), isl (1 + R)] and likewise around "
                        "osl, as vLLM's random dataset; 0 <= R < 1 (default 0: fixed lengths); with --range-style "
                        "up_to from [isl R, isl], as SGLang's bench_serving, 0 <= R <= 1")
    p.add_argument("--range-style", choices=BENCH_RANGE_STYLES, default=BENCH_RANGE_STYLES[0],
                   help="how the client reads its range ratio: around the lengths (vllm bench serve, the default) "
                        "or up to them (SGLang's bench_serving, vLLM's benchmark_serving.py before it)")
    p.add_argument("--seed", type=int, default=0, help="seed of the drawn lengths (default 0)")
    p.add_argument("--arrivals", choices=BENCH_ARRIVALS, default=BENCH_ARRIVALS[0],
                   help="clients' first requests spread over one cycle, as a served benchmark settles "
                        "(default), or all at once, staying in waves as a client with fixed lengths measures")
    p.add_argument("--candidate", metavar="FILE", help="candidate whose overrides apply to the pool")
    p = add_command(group, "runway", help="capacity runway: each pool's traffic growth per week from the stored "
                                          "requests, and the first date it fails its SLA tolerance, with the "
                                          "earliest and latest dates and what holding the horizon takes",
                    example="hetpool replay runway --candidate examples/candidates/sla_cost.yaml --growth 5%/week "
                            "--horizon 12w", handler=runway_cmd, common=common)
    p.add_argument("--pool", action="append", default=[], metavar="ID",
                   help="report this pool (repeatable; default: every pool with stored traffic)")
    p.add_argument("--candidate", metavar="FILE",
                   help="candidate whose routing and SLA tiers the replay uses (default: "
                        "examples/candidates/sla_cost.yaml, the production rule and its tiers)")
    p.add_argument("--gate", metavar="FILE", help="gate YAML whose max_sla_violation_rate is the tolerance "
                                                  "(default 1 %%)")
    p.add_argument("--window", type=duration_ms, default="28d", metavar="DAYS",
                   help="history the growth is fitted over, in whole days (default 28d)")
    p.add_argument("--growth", default="auto", metavar="auto|R%/week",
                   help="fit the growth from the window (default), or take this weekly rate for every pool")
    p.add_argument("--horizon", type=duration_ms, default="26w", metavar="WEEKS",
                   help="how far ahead to look (default 26w)")
    p.add_argument("--seed", type=int, default=0, help="seed of the thinned and replicated arrivals (default 0)")
    p.add_argument("--trace", help="stored trace to use (default: the one with the newest requests)")
    p.add_argument("--no-save", action="store_true", help="do not store the result for the console and paging")


def _int_list(text: str) -> list[int]:
    from replay.bench import concurrency_levels

    try:
        return list(concurrency_levels(text))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _traffic(ctx: Context, con: duckdb.DuckDBPyConnection, history: bool = False) -> Traffic:
    """The requests to replay: a trace file, or a window of stored ones (with history, also the stored requests
    before the window, which the online predictor starts from)."""
    from replay import read_traffic
    from replay.whatif import file_traffic, pick_trace, stored_traffic
    from store.requests import list_traces, read_history, read_requests

    args = ctx.args
    if getattr(args, "traffic", None):
        if args.trace or args.start or args.end:
            raise UsageError("--traffic replays a file; --trace, --start and --end select stored requests")
        fmt, parsed = read_traffic(args.traffic, args.format, parse_options(args))
        traffic = file_traffic(args.traffic, fmt, parsed)
        for note in traffic.notes:
            ctx.note(note)
        return traffic
    start = parse_time(args.start, "--start") if args.start else None
    end = parse_time(args.end, "--end") if args.end else None
    trace, why = pick_trace(list_traces(con), args.trace)  # one trace: others may lie years away
    frame = read_requests(con, trace=trace, start_ms=start, end_ms=end)
    before = read_history(con, trace=trace, before_ms=start) if history else None
    return stored_traffic(frame, trace=trace, start=args.start, end=args.end, start_ms=start, end_ms=end,
                          history=before, notes=(why,) if why else ())


def with_fault_telemetry(con: duckdb.DuckDBPyConnection, traffic: Traffic, candidate: Candidate) -> Traffic:
    """The traffic with each pool's failure and throttling record (store.views.faults.telemetry_for)."""
    from store.views.faults import telemetry_for

    if candidate.faults.mode == "off":
        return traffic
    frame = telemetry_for(con, traffic.first_ms, traffic.last_ms, candidate.faults.window_days)
    return dataclasses.replace(traffic, telemetry=frame)


def run(ctx: Context) -> int:
    """Replay, compare, gate, save; exit 1 when the gate fails."""
    from replay import load_candidate, load_gate
    from replay.whatif import run_whatif
    from store import require_registry
    from store.replay_runs import save_replay_run

    args = ctx.args
    if args.gate and not args.baseline:
        raise UsageError("--gate compares against a baseline; pass --baseline FILE too")
    store = ctx.store()
    with store.read() as con:
        registry = require_registry(con)
        candidate = load_candidate(args.candidate, registry)
        baseline = load_candidate(args.baseline, registry) if args.baseline else None
        gate = load_gate(args.gate) if args.gate else None
        traffic = _traffic(ctx, con, history=True)
        traffic = with_fault_telemetry(con, traffic, candidate)
    ctx.note(f"replaying {traffic.described} under {candidate.name!r}"
             + (f"; the predictor starts from the {traffic.history.height:,} requests stored before it"
                if traffic.history is not None else ""))
    whatif = run_whatif(candidate, traffic, registry, baseline=baseline, gate=gate, seed=args.seed,
                        oracle_gap=args.oracle_gap)
    with store.transaction("hetpool replay run") as con:
        run_id = save_replay_run(con, **whatif.run_record())
    data = {"run_id": run_id, **whatif.data(), "traffic_notes": list(traffic.notes)}
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        whatif.result.requests.write_parquet(out / "requests.parquet")
        if whatif.base_result:
            whatif.base_result.requests.write_parquet(out / "baseline_requests.parquet")
        if whatif.oracle_result and whatif.oracle_result is not whatif.result:
            whatif.oracle_result.requests.write_parquet(out / "oracle_requests.parquet")
        (out / "summary.json").write_text(json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")
    lines = [f"replay run {run_id}: {traffic.described}", *(f"  ({n})" for n in traffic.notes if traffic.spec.get(
        "kind") == "stored"), *whatif.report_lines()]
    ctx.emit(data, "\n".join(lines))
    return GATE_FAILED if whatif.failed else 0


def calibrate_cmd(ctx: Context) -> int:
    """Fit coefficients from observations and/or a benchmark table and write them as a candidate file."""
    import yaml

    from replay import calibrate, calibrated_candidate, candidate_to_dict, load_candidate, read_bench_table
    from replay.calibrate import FITTED
    from replay.whatif import fmt_s as _fmt
    from store import require_registry

    args = ctx.args
    bench = read_bench_table(args.bench) if args.bench else None
    with ctx.store().read() as con:
        registry = require_registry(con)
        base = load_candidate(args.base, registry) if args.base else None
        if args.no_requests and bench is None:
            raise UsageError("--no-requests fits from a benchmark table alone; pass --bench FILE")
        traffic = None if args.no_requests else _calibration_traffic(ctx, con, bench is not None)
    described = traffic.described if traffic else ""
    for note in traffic.notes if traffic and traffic.spec.get("kind") == "stored" else ():
        ctx.note(note)
    fits, unknown = calibrate(traffic.frame if traffic else None, registry, bench=bench, base=base, carry=args.carry,
                              pools=args.pool or None)
    body = calibrated_candidate(fits, name=Path(args.out).stem, base=candidate_to_dict(base) if base else None)
    sources = [s for s in (described, f"benchmark table {args.bench}" if args.bench else "") if s]
    header = [f"# Calibrated from {' and '.join(sources)}."]
    for f in fits:
        coefficients = ", ".join(f"{name} {_fmt(getattr(f, name), '')}" for name in FITTED)
        header.append(f"# {f.pool}: {coefficients}; TTFT MAPE {_share(f.ttft_mape)} R2 {_fmt(f.ttft_r2, '')}, TPOT "
                      f"MAPE {_share(f.tpot_mape)} R2 {_fmt(f.tpot_r2, '')} (n={f.n_ttft}, bench rows {f.n_bench})")
        header += [f"# {f.pool}: {n}" for n in f.notes if n.startswith(("the model cannot explain", "fitted "))]
    Path(args.out).write_text("\n".join(header) + "\n" + yaml.safe_dump(body, sort_keys=False))
    widths = {name: max(7, len(name)) for name in FITTED}
    lines = [f"{'pool':<12} {'n':>6} {'bench':>5} " + " ".join(f"{name:>{w}}" for name, w in widths.items())
             + f" {'ttft MAPE':>9} {'MdAPE':>6} {'R2':>6} {'tpot MAPE':>9} {'MdAPE':>6} {'R2':>6}"]
    shown: set[tuple[str, ...]] = set()
    for f in fits:
        lines.append(f"{f.pool:<12} {f.n_ttft:>6} {f.n_bench:>5} "
                     + " ".join(f"{_fmt(getattr(f, name), ''):>{w}}" for name, w in widths.items())
                     + f" {_share(f.ttft_mape):>9} {_share(f.ttft_mdape):>6} {_fmt(f.ttft_r2, ''):>6} "
                     f"{_share(f.tpot_mape):>9} {_share(f.tpot_mdape):>6} {_fmt(f.tpot_r2, ''):>6}")
        if f.coefficients and f.group not in shown and f.carried_from is None:
            shown.add(f.group)
            together = f" (one fit for {', '.join(f.group)}: same chip and engine)" if len(f.group) > 1 else ""
            lines.append(f"  coefficients{together}:")
            lines += [f"    {c.describe()}" for c in f.coefficients]
        lines += [f"  note: {n}" for n in f.notes]
    lines += [f"skipped {n} requests observed on pool {p!r}, which the fleet does not serve"
              for p, n in unknown.items()]
    lines.append(f"wrote {args.out}")
    ctx.emit({"out": args.out, "fits": [dataclasses.asdict(f) for f in fits], "unknown_pools": unknown},
             "\n".join(lines))
    return 0


def _calibration_traffic(ctx: Context, con: duckdb.DuckDBPyConnection, have_bench: bool) -> Traffic | None:
    """The observed requests to fit; with a benchmark table, none stored is no error (the table alone is fitted)."""
    from replay import ReplayError

    try:
        return _traffic(ctx, con)
    except ReplayError:
        args = ctx.args
        if have_bench and not (getattr(args, "traffic", None) or args.trace or args.start or args.end):
            ctx.note("no stored requests: fitting the benchmark table alone")
            return None
        raise


def sweep_cmd(ctx: Context) -> int:
    """Expand the grid over the base candidate, replay every point, mark the Pareto front."""
    from replay import expand, load_candidate, load_grid, run_sweep
    from replay.whatif import fmt_s as _fmt
    from store import require_registry

    args = ctx.args
    if args.workers < 1:
        raise UsageError(f"--workers must be >= 1, got {args.workers}")
    if args.address and args.executor != "ray":
        raise UsageError("--address names a Ray cluster; pass --executor ray too")
    with ctx.store().read() as con:
        registry = require_registry(con)
        base = load_candidate(args.candidate, registry)
        grid = load_grid(args.grid, registry)
        traffic = with_fault_telemetry(con, _traffic(ctx, con, history=True), base)
    points = expand(grid, base)
    where = (f"a Ray cluster{f' at {args.address}' if args.address else ' started here'}" if args.executor == "ray"
             else f"{args.workers} worker(s)")
    for note in traffic.notes if traffic.spec.get("kind") == "stored" else ():
        ctx.note(note)
    ctx.note(f"sweeping {len(points)} candidates over {traffic.described} on {where}")
    table = run_sweep(points, traffic.frame, registry, args.seed, args.workers, executor=args.executor,
                      address=args.address, history=traffic.history, telemetry=traffic.telemetry
                      ).sort("busy_cost_usd")
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
    ctx.emit({"traffic": traffic.described, "points": table.to_dicts()}, "\n".join(lines))
    return 0


def bench_cmd(ctx: Context) -> int:
    """Run the closed-loop benchmark on one replica of a pool at each concurrency."""
    from replay import Candidate, closed_loop, default_requests, load_candidate
    from replay.assumptions import assumptions
    from replay.bands import bands
    from replay.bench import fixed_lengths, schedule_text
    from replay.fleet import PoolSpec, pools_by_id
    from store import require_registry

    args = ctx.args
    with ctx.store().read() as con:
        registry = require_registry(con)
        candidate = load_candidate(args.candidate, registry) if args.candidate else None
    pools = pools_by_id(registry, candidate or Candidate(name="bench"))
    if args.pool not in pools:
        raise UsageError(f"unknown pool {args.pool!r}; replayable: {', '.join(pools)}")
    spec = pools[args.pool]
    if args.requests is not None and args.requests < 1:
        raise UsageError(f"--num-prompts must be >= 1, got {args.requests}")
    points = [closed_loop(spec, c, args.isl, args.osl, args.requests or default_requests(c),
                          range_ratio=args.random_range_ratio, seed=args.seed, warmups=args.num_warmups,
                          arrivals=args.arrivals, range_style=args.range_style)
              for c in args.concurrency]
    lengths = (f"isl {args.isl}, osl {args.osl}" if fixed_lengths(args.random_range_ratio, args.range_style) else
               f"isl {args.isl}, osl {args.osl} (range ratio {args.random_range_ratio:g} "
               f"{args.range_style.replace('_', ' ')} them, seed {args.seed})")
    warmups = f", {args.num_warmups} warm-ups" if args.num_warmups else ""
    lines = [f"{spec.id}: one replica of {spec.devices_per_replica} x {spec.chip.name} (pp {spec.pp}; "
             f"{schedule_text(spec)}), "
             f"{spec.model.id}, {lengths}{warmups}",
             f"{'concurrency':>11} {'requests':>8} {'ttft mean':>9} {'ttft p50':>9} {'ttft p99':>9} "
             f"{'tpot mean':>9} {'tpot p50':>9} {'tpot p99':>9} {'output tok/s':>12} {'req/s':>7}   (ms)"]
    for p in points:
        lines.append(f"{p.concurrency:>11} {p.requests:>8} {p.ttft_ms_mean:>9.1f} {p.ttft_ms_p50:>9.1f} "
                     f"{p.ttft_ms_p99:>9.1f} {_num(p.tpot_ms_mean):>9} {_num(p.tpot_ms_p50):>9} "
                     f"{_num(p.tpot_ms_p99):>9} {p.output_tok_s:>12.1f} {p.req_s:>7.2f}")
    spread = (candidate.override(spec.id).spread if candidate else None) or {}
    banded: list[dict[str, Any]] = [{} for _ in points]
    if spread:  # the fit's standard errors carried to each concurrency's median TTFT and TPOT
        errors = ", ".join(f"{k} x/ {v:g}" for k, v in spread.items())
        lines.append(f"band within the fit's standard errors ({errors}):")
        for p, out in zip(points, banded, strict=True):
            def medians(s: PoolSpec, c: int = p.concurrency) -> tuple[float, float | None]:
                q = closed_loop(s, c, args.isl, args.osl, args.requests or default_requests(c),
                                range_ratio=args.random_range_ratio, seed=args.seed, warmups=args.num_warmups,
                                arrivals=args.arrivals, range_style=args.range_style)
                return q.ttft_ms_p50, q.tpot_ms_p50
            ttft, tpot = bands(spec, spread, medians)
            out.update(ttft_ms_p50_band=ttft, tpot_ms_p50_band=tpot)
            lines.append(f"{p.concurrency:>11}   TTFT p50 {_span(ttft)} ms, TPOT p50 {_span(tpot)} ms")
    notes = assumptions(spec)
    lines += [f"note: {n}" for n in notes]
    ctx.emit([{**p.__dict__, **out, "notes": list(notes)} for p, out in zip(points, banded, strict=True)],
             "\n".join(lines))
    return 0


DEFAULT_RUNWAY_CANDIDATE = Path(__file__).resolve().parents[2] / "examples" / "candidates" / "sla_cost.yaml"


def runway_cmd(ctx: Context) -> int:
    """Fit each pool's growth, find its breaking date and band; exit 1 when a pool breaks within the horizon."""
    from app.runway_job import compute_runway_job
    from canonical.timeunits import DAY_MS, WEEK_MS
    from replay import load_candidate, load_gate
    from replay.gate import DEFAULT_SLA_VIOLATION_RATE
    from replay.runway.growth import parse_growth
    from replay.runway.stored import RunwayAsk
    from store import require_registry

    args = ctx.args
    if args.window % DAY_MS:
        raise UsageError(f"--window {args.window / DAY_MS:g} days: expected whole days, like 28d")
    growth = parse_growth(args.growth)
    gate = load_gate(args.gate) if args.gate else None
    store = ctx.store()
    with store.read() as con:
        registry = require_registry(con)
        candidate = load_candidate(args.candidate or DEFAULT_RUNWAY_CANDIDATE, registry)
    ask = RunwayAsk(window_days=args.window // DAY_MS, growth=growth, horizon_weeks=args.horizon / WEEK_MS,
                    tolerance=gate.sla_tolerance if gate else DEFAULT_SLA_VIOLATION_RATE, pools=tuple(args.pool),
                    seed=args.seed)
    done = compute_runway_job(store, registry, candidate, ask, trace=args.trace, save=not args.no_save)
    for note in done.notes:
        ctx.note(note)
    ctx.emit(done.runway.data(), "\n".join(runway_lines(done.runway, candidate.name)))
    return GATE_FAILED if done.runway.breaking else 0


def runway_lines(runway: Runway, candidate: str) -> list[str]:
    """The runway as the CLI prints it: a header, a row per pool, its notes."""
    def day(d: object) -> str:
        return str(d) if d is not None else "-"

    lines = [f"runway from {runway.today} under {candidate!r}, horizon {runway.horizon_weeks:g} weeks (to "
             f"{runway.horizon_end}), SLA tolerance {runway.tolerance:.2%} of requests; replayed {runway.replayed}",
             f"{'pool':<14} {'growth/week':>11} {'interval':>17} {'breaks on':>10} {'earliest':>10} {'latest':>10} "
             f"{'now':>6} {'add':>4} {'$/month':>10}"]
    for p in runway.pools:
        g = p.growth
        lines.append(f"{p.pool:<14} {g.per_week:>+11.2%} {f'{g.low:+.1%} .. {g.high:+.1%}':>17} "
                     f"{day(p.breaks_on):>10} {day(p.breaks_on_low):>10} {day(p.breaks_on_high):>10} "
                     f"{p.violation_rate_now:>6.2%} {p.replicas_to_add if p.replicas_to_add is not None else '-':>4} "
                     f"{f'${p.added_cost_per_month_usd:,.0f}' if p.added_cost_per_month_usd else '-':>10}")
        lines += [f"  {n}" for n in p.notes]
    broken = runway.breaking
    lines.append(f"{len(broken)} pool(s) break within the horizon: {', '.join(p.pool for p in broken)}" if broken
                 else "every pool holds its SLA through the horizon")
    return lines


def _share(v: float | None) -> str:
    """A share (a MAPE of 0.123) as a percentage, '12.3%', or '-'."""
    return "-" if v is None else f"{v:.1%}"


def _span(band: tuple[float, float] | None) -> str:
    return "-" if band is None else f"{band[0]:.1f}-{band[1]:.1f}"


def _num(v: float | None) -> str:
    return "-" if v is None else f"{v:.1f}"
