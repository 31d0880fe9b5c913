"""Capacity runway cost: `hetpool replay runway` over the demo's pools (its two days of traffic at a given growth,
the demo having too little history to fit one), against one replay of the same window in the same run.

Run: .venv/bin/python -m benchmarks.bench_runway [--db PATH] [--growth 5%/week] [--horizon 26w]
Without --db it builds the demo at its default size (2 days, 8 devices per pool) in a temporary folder first; the
build is not timed.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import resource
import tempfile
from pathlib import Path

from benchmarks.common import peak_rss_mib, report, timed

REPO = Path(__file__).resolve().parent.parent


def cpu_s() -> float:
    """User plus system CPU seconds of this process so far."""
    u = resource.getrusage(resource.RUSAGE_SELF)
    return u.ru_utime + u.ru_stime


def main() -> None:
    from app.cli import main as cli
    from app.runway_job import compute_runway_job
    from canonical.timeunits import DAY_MS, WEEK_MS, parse_duration_ms
    from replay import load_candidate, native, run_replay
    from replay.runway.growth import parse_growth
    from replay.runway.stored import RunwayAsk
    from store import Store, require_registry
    from store.requests import list_traces, read_requests

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", help="a demo database (default: build one)")
    parser.add_argument("--growth", default="5%/week")
    parser.add_argument("--horizon", default="26w")
    args = parser.parse_args()
    if args.db:
        db = Path(args.db)
    else:
        db = Path(tempfile.mkdtemp(prefix="hetpool-runway-")) / "demo.duckdb"
        assert cli(["--db", str(db), "demo", "--end", "2026-12-01T00:00:00Z"]) == 0
    store = Store(db)
    with store.read() as con:
        registry = require_registry(con)
        trace = list_traces(con).row(0, named=True)
        window = read_requests(con, start_ms=max(int(trace["first_ms"]), int(trace["last_ms"]) + 1 - WEEK_MS))
    candidate = load_candidate(REPO / "examples" / "candidates" / "sla_cost.yaml", registry)
    days = (int(window["arrival_ms"].max()) - int(window["arrival_ms"].min())) / DAY_MS  # type: ignore[arg-type]
    print(f"demo {db}: {window.height:,} requests over {days:.1f} days; "
          f"replica {native.status()}; {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}")
    before = cpu_s()
    replay_s, _ = timed(lambda: run_replay(candidate, window, registry, 0))
    replay_cpu = cpu_s() - before
    report("one replay of the window (baseline)", replay_s, "s")
    report("  its CPU time (user + system)", replay_cpu, "s")
    ask = RunwayAsk(growth=parse_growth(args.growth), horizon_weeks=parse_duration_ms(args.horizon) / WEEK_MS)
    before = cpu_s()
    runway_s, done = timed(lambda: compute_runway_job(store, registry, candidate, ask, save=False))
    report(f"runway of {len(done.runway.pools)} pools ({done.runway.replayed.split('(')[-1].rstrip(')')})",
           runway_s, "s", replay_s, "one replay")
    report("  its CPU time (user + system)", cpu_s() - before, "s", replay_cpu, "one replay's")
    report("  peak memory", peak_rss_mib(), "MiB")
    for note in done.notes:
        print(f"  ({note})")
    for p in done.runway.pools:
        print(f"  {p.pool:<10} breaks on {p.breaks_on or '-'} (earliest {p.breaks_on_low or '-'}, latest "
              f"{p.breaks_on_high or '-'}), now {p.violation_rate_now:.2%}, add {p.replicas_to_add or '-'}: "
              f"{p.notes[-1]}")
    print(f"measured {dt.date.today()}; target: under 60 s on two cores")


if __name__ == "__main__":
    main()
