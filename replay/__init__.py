"""Replay engine: traffic in, candidate routing and cost model applied, per-request rows and a summary out.

Library entry points for the CLI and the console:
    run_replay(candidate, traffic_frame, registry, seed) -> ReplayResult(requests, summary)
    load_candidate(path, registry), load_gate(path), evaluate(gate, baseline, candidate) -> Verdict
    read_traffic(path, fmt, options) -> (format, Parsed), calibrate(requests, registry, bench=...), run_sweep(...)
    closed_loop(pool, concurrency, isl, osl, requests, *, range_ratio, seed, warmups) -> BenchPoint,
    read_bench_table(path)
The replica's hot modules run compiled when `make native` has built them from the current sources and this
Python (replay/native.py); `native.status()` says which.
"""

from replay import native

native.extend(__path__, __name__)  # first: the package's compiled modules, if built, ahead of their sources

# ruff: noqa: E402  (the imports below come after the package's path is set)
from replay.bench import BenchPoint, closed_loop, default_requests
from replay.benchtable import parse_bench_table, read_bench_table
from replay.calibrate import PoolFit, calibrate, calibrated_candidate
from replay.candidate import Candidate, PoolOverride, SlaTier
from replay.candidate_loader import candidate_to_dict, load_candidate, load_candidate_text
from replay.engine import ReplayResult, replay_summary, run_replay
from replay.exceptions import (
    BenchTableError,
    CandidateError,
    GateError,
    GridError,
    ReplayError,
    UnknownNameError,
)
from replay.gate import Gate, Verdict, evaluate, load_gate, load_gate_text
from replay.policies import POLICIES, get_policy
from replay.summary import Summary, summary_from_dict
from replay.sweep import Grid, expand, load_grid, load_grid_text, pareto_front, run_sweep
from traces import FORMATS, Parsed, ParseOptions, parse_traffic, read_traffic
from traces.exceptions import TrafficError

__all__ = [
    "FORMATS", "POLICIES", "BenchPoint", "BenchTableError", "Candidate", "CandidateError", "Gate", "GateError",
    "Grid", "GridError", "ParseOptions", "Parsed", "PoolFit", "PoolOverride", "ReplayError", "ReplayResult",
    "SlaTier", "Summary", "TrafficError", "UnknownNameError", "Verdict", "calibrate", "calibrated_candidate",
    "candidate_to_dict", "closed_loop", "default_requests", "evaluate", "expand", "get_policy",
    "load_candidate", "load_candidate_text", "load_gate", "load_gate_text", "load_grid", "load_grid_text", "native",
    "pareto_front", "parse_bench_table", "parse_traffic", "read_bench_table", "read_traffic", "replay_summary",
    "run_replay", "run_sweep", "summary_from_dict",
]
