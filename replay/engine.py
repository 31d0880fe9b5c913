"""The replay as a pure function: (candidate, traffic, registry, seed) -> per-request rows and a summary."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from pool_registry import Registry
from replay.candidate import Candidate
from replay.errors import ReplayError
from replay.fleet import resolve_pools
from replay.plan import build_plan
from replay.policies import get_policy
from replay.policies.pd_split import PdSplit
from replay.simulator import simulate
from replay.split import simulate_split
from replay.summary import Summary, build
from replay.traffic.base import DEFAULT_TIER, TRAFFIC_SCHEMA


@dataclass(frozen=True)
class ReplayResult:
    """One run: a row per request (arrival order) and the summary."""

    requests: pl.DataFrame
    summary: Summary


REQUIRED = ("arrival_ms", "in_tokens", "out_tokens")


def prepare_traffic(traffic: pl.DataFrame) -> pl.DataFrame:
    """Fill optional columns with their defaults and sort by arrival (then seq), keeping ties stable."""
    missing = [c for c in REQUIRED if c not in traffic.columns]
    if missing:
        raise ReplayError(f"traffic frame lacks column {', '.join(missing)}; has: {', '.join(traffic.columns)}")
    defaults = {"seq": None, "cached_tokens": 0, "sla_tier": DEFAULT_TIER, "model": ""}
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


def run_replay(candidate: Candidate, traffic: pl.DataFrame, registry: Registry, seed: int = 0) -> ReplayResult:
    """Replay traffic under a candidate. Pure: the result depends only on the arguments."""
    frame = prepare_traffic(traffic)
    if frame.height == 0:
        raise ReplayError("no traffic to replay: the frame is empty")
    rng = np.random.default_rng(seed)
    pools = resolve_pools(registry, candidate)
    plan = build_plan(frame, pools, candidate, rng)
    policy = get_policy(candidate.policy)
    if isinstance(policy, PdSplit):
        raw = simulate_split(plan, policy.configure(candidate.policy_options), candidate.overflow)
    else:
        raw = simulate(plan, policy, candidate.overflow)
    requests, summary = build(plan, raw, frame, candidate=candidate.name, policy=candidate.policy, seed=seed,
                              drain_s=candidate.drain_s)
    return ReplayResult(requests, summary)


def replay_summary(candidate: Candidate, traffic: pl.DataFrame, registry: Registry, seed: int = 0) -> Summary:
    """Only the summary, for sweeps where per-request rows would cost a copy back from the worker."""
    return run_replay(candidate, traffic, registry, seed).summary
