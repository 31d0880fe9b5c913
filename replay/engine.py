"""The replay as a pure function: (candidate, traffic, registry, seed[, history]) -> per-request rows and a summary.

`history` is what a router knew before the traffic started: requests that completed earlier (in_tokens,
out_tokens, model, sla_tier), from which the online predictor starts. It never includes the replayed traffic.
`telemetry` is each pool's failure and throttling record over the window before it (replay.faults), which
the candidate's `faults` replays, replaces or switches off.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import polars as pl

from pool_registry import Registry
from replay.candidate import Candidate
from replay.exceptions import ReplayError
from replay.faults import PoolFaultModel, resolve
from replay.fleet import resolve_pools
from replay.plan import build_plan
from replay.policies import get_policy
from replay.simulator import simulate
from replay.summary import Summary, build
from traces.base import DEFAULT_TIER, TRAFFIC_SCHEMA


@dataclass(frozen=True)
class ReplayResult:
    """One run: a row per request (arrival order), the summary, and every replica's busy spans
    (pool, replica, start_ms, end_ms: when it had at least one sequence to run)."""

    requests: pl.DataFrame
    summary: Summary
    busy: pl.DataFrame


REQUIRED = ("arrival_ms", "in_tokens", "out_tokens")


def prepare_traffic(traffic: pl.DataFrame) -> pl.DataFrame:
    """Fill optional columns with their defaults and sort by arrival (then seq), keeping ties stable."""
    missing = [c for c in REQUIRED if c not in traffic.columns]
    if missing:
        raise ReplayError(f"traffic frame lacks column {', '.join(missing)}; has: {', '.join(traffic.columns)}")
    defaults = {"seq": None, "cached_tokens": 0, "sla_tier": DEFAULT_TIER, "model": "", "max_tokens": None}
    add = []
    for col, value in defaults.items():
        if col not in traffic.columns:
            add.append(pl.int_range(pl.len(), dtype=pl.Int64).alias("seq") if col == "seq"
                       else pl.lit(value, TRAFFIC_SCHEMA[col]).alias(col))
    frame = traffic.with_columns(add) if add else traffic
    frame = frame.with_columns(pl.col("sla_tier").fill_null(DEFAULT_TIER), pl.col("model").fill_null(""),
                               pl.col("cached_tokens").fill_null(0))
    if frame.select(pl.any_horizontal(pl.col(list(REQUIRED)).is_null().any())).item():
        raise ReplayError("traffic frame has null arrival_ms, in_tokens or out_tokens")
    keys = ["arrival_ms", "trace", "seq"] if "trace" in frame.columns else ["arrival_ms", "seq"]
    return frame.sort(keys, maintain_order=True)


def run_replay(candidate: Candidate, traffic: pl.DataFrame, registry: Registry, seed: int = 0,
               history: pl.DataFrame | None = None, telemetry: pl.DataFrame | None = None) -> ReplayResult:
    """Replay traffic under a candidate. Pure: the result depends only on the arguments."""
    frame = prepare_traffic(traffic)
    if frame.height == 0:
        raise ReplayError("no traffic to replay: the frame is empty")
    rng = np.random.default_rng(seed)
    pools = resolve_pools(registry, candidate)
    plan = build_plan(frame, pools, candidate, rng, history)
    policy = get_policy(candidate.policy)
    models = resolve(candidate.faults, [p.id for p in pools], telemetry)
    faults = [models[p.id] for p in pools]
    live = faults if any(f.failures_per_device_hour > 0 or f.speed != 1.0 for f in faults) else None
    raw = simulate(plan, policy, candidate.policy_options, candidate.overflow, candidate.noise, live, seed)
    requests, summary = build(plan, raw, frame, candidate=candidate.name, policy=candidate.policy, seed=seed,
                              drain_s=candidate.drain_s)
    summary = dataclasses.replace(summary, faults={p.id: fault_row(models[p.id]) for p in pools
                                                   if models[p.id].source != "none"})
    return ReplayResult(requests, summary, busy_spans(plan.t0_ms, [p.id for p in pools], raw.spans))


def fault_row(f: PoolFaultModel) -> dict[str, float | str]:
    """One pool's replayed failure and throttling figures, as the summary reports them."""
    return {"failures_per_device_hour": f.failures_per_device_hour, "repair_s": f.repair_s,
            "throttled_share": f.throttled_share, "throttled_clock": f.throttled_clock, "speed": f.speed,
            "source": f.source}


def busy_spans(t0_ms: int, pool_ids: list[str], spans: list[tuple[int, int, np.ndarray]]) -> pl.DataFrame:
    """Busy spans of every replica as a frame in epoch milliseconds."""
    pools, replicas, starts, ends = [], [], [], []
    for pool, replica, s in spans:
        k = s.size // 2
        pools += [pool_ids[pool]] * k
        replicas += [replica] * k
        starts.append(s[0::2])
        ends.append(s[1::2])
    start = np.concatenate(starts) if starts else np.zeros(0)
    end = np.concatenate(ends) if ends else np.zeros(0)
    return pl.DataFrame({"pool": pl.Series(pools, dtype=pl.String), "replica": pl.Series(replicas, dtype=pl.Int64),
                         "start_ms": t0_ms + start * 1000.0, "end_ms": t0_ms + end * 1000.0})


def replay_summary(candidate: Candidate, traffic: pl.DataFrame, registry: Registry, seed: int = 0,
                   history: pl.DataFrame | None = None, telemetry: pl.DataFrame | None = None) -> Summary:
    """Only the summary, for sweeps where per-request rows would cost a copy back from the worker."""
    return run_replay(candidate, traffic, registry, seed, history, telemetry).summary
