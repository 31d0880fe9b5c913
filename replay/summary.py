"""From simulator arrays to the per-request frame and the run summary.

Accounting: every request is exactly one of served, rejected or still queued (routed but not finished when
the replay stops, which only happens when the candidate sets drain_s). Percentiles are over served requests.
The SLA violation rate counts served requests that missed their tier (degraded ones always do) plus rejected
ones, over served + rejected. cost_per_mtok divides attributed cost by served input + output tokens.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import polars as pl

from replay import costmodel
from replay.plan import Plan
from replay.simulator import DEGRADE, FLAG_NAMES, Raw

SLA_EPS = 1e-9  # predicted and simulated times agree to rounding; do not call that a miss


@dataclass(frozen=True)
class PoolSummary:
    """One pool's share of a run."""

    requests: int
    tokens_in: int
    tokens_out: int
    cost_usd: float
    provisioned_cost_usd: float
    busy_s: float
    utilization: float


@dataclass(frozen=True)
class Summary:
    """The numbers a platform lead compares between candidates."""

    candidate: str
    policy: str
    seed: int
    requests: int
    served: int
    rejected: int
    still_queued: int
    tokens_in: int
    tokens_out: int
    served_tokens_in: int
    served_tokens_out: int
    cost_usd: float
    provisioned_cost_usd: float
    cost_per_mtok: float | None
    ttft_p50: float | None
    ttft_p95: float | None
    ttft_p99: float | None
    e2e_p50: float | None
    e2e_p95: float | None
    e2e_p99: float | None
    sla_violation_rate: float
    window_s: float
    overflow: dict[str, int]
    utilization: dict[str, float]
    pools: dict[str, PoolSummary]

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON."""
        return asdict(self)


def _pct(values: np.ndarray, q: float) -> float | None:
    return float(np.percentile(values, q)) if values.size else None


def build(plan: Plan, raw: Raw, traffic: pl.DataFrame, *, candidate: str, policy: str, seed: int,
          drain_s: float | None) -> tuple[pl.DataFrame, Summary]:
    """The per-request frame (plan order) and the summary of one run."""
    n = plan.n
    routed = raw.pool >= 0
    finish = plan.arrival + raw.e2e
    last = float(plan.arrival[-1]) if n else 0.0
    if drain_s is not None:
        horizon = last + drain_s
        queued = routed & (finish > horizon)
    else:
        horizon = max(last, float(np.nanmax(finish)) if routed.any() else last)
        queued = np.zeros(n, dtype=bool)
    served = routed & ~queued
    rejected = ~routed
    met = served & (raw.ttft <= plan.ttft_limit + SLA_EPS) & (raw.e2e <= plan.e2e_limit + SLA_EPS) \
        & (raw.flag != DEGRADE)
    names = [p.id for p in plan.pools]
    keep = served
    outcome = np.where(served, 0, np.where(queued, 2, 1))
    reasons = pl.Series("reason", [None] * n, dtype=pl.String)
    if raw.reasons:
        idx = sorted(raw.reasons)
        reasons = reasons.scatter(idx, [raw.reasons[i] for i in idx])
    codes = pl.DataFrame({"p": raw.pool, "d": raw.decode_pool, "f": raw.flag, "o": outcome, "keep": keep,
                          "met": met})
    pool_names = {k: name for k, name in enumerate(names)}
    labels = codes.select(
        pl.col("p").replace_strict(pool_names, default=None, return_dtype=pl.String).alias("pool"),
        pl.col("d").replace_strict(pool_names, default=None, return_dtype=pl.String).alias("decode_pool"),
        pl.when(pl.col("keep")).then(pl.col("met")).alias("sla_met"),
        pl.col("f").replace_strict(dict(enumerate(FLAG_NAMES)), return_dtype=pl.String).alias("overflow"),
        pl.col("o").replace_strict({0: "served", 1: "rejected", 2: "queued"}, return_dtype=pl.String
                                   ).alias("outcome"),
    )
    nan = np.nan
    frame = pl.concat([
        traffic.select(c for c in ("trace", "seq", "arrival_ms", "sla_tier", "model", "in_tokens", "out_tokens",
                                   "cached_tokens") if c in traffic.columns),
        labels.select("pool", "decode_pool"),
        pl.DataFrame({name: np.where(keep, values, nan) for name, values in (
            ("wait_s", raw.wait), ("ttft_s", raw.ttft), ("e2e_s", raw.e2e), ("cost_usd", raw.cost))}
        ).fill_nan(None),
        labels.select("sla_met", "overflow", "outcome"),
        reasons.to_frame(),
    ], how="horizontal")
    busy = np.zeros(len(plan.pools))
    for pools, start, end in raw.busy:
        np.add.at(busy, pools, np.clip(np.minimum(end, horizon) - np.minimum(start, horizon), 0, None))
    pool_rows = {}
    cost = raw.cost[served]
    for k, spec in enumerate(plan.pools):
        mine = routed & (raw.pool == k)
        util = busy[k] / (spec.slots * horizon) if horizon > 0 else 0.0
        pool_rows[spec.id] = PoolSummary(
            requests=int(mine.sum()), tokens_in=int(plan.in_tokens[mine].sum()),
            tokens_out=int(plan.out_tokens[mine].sum()),
            cost_usd=float(np.nansum(np.where(served & (raw.pool == k), raw.cost, 0.0))),
            provisioned_cost_usd=costmodel.provisioned_cost(spec, horizon), busy_s=float(busy[k]),
            utilization=float(util))
    served_in, served_out = int(plan.in_tokens[served].sum()), int(plan.out_tokens[served].sum())
    total_cost = float(cost.sum())
    decided = int(served.sum() + rejected.sum())
    overflow = {name: int((raw.flag == code).sum()) for code, name in ((1, "queue"), (2, "degrade"))}
    overflow["reject"] = int(rejected.sum())
    ttft, e2e = raw.ttft[served], raw.e2e[served]
    summary = Summary(
        candidate=candidate, policy=policy, seed=seed, requests=n, served=int(served.sum()),
        rejected=int(rejected.sum()), still_queued=int(queued.sum()),
        tokens_in=int(plan.in_tokens.sum()), tokens_out=int(plan.out_tokens.sum()),
        served_tokens_in=served_in, served_tokens_out=served_out, cost_usd=total_cost,
        provisioned_cost_usd=float(sum(p.provisioned_cost_usd for p in pool_rows.values())),
        cost_per_mtok=total_cost / (served_in + served_out) * 1e6 if served_in + served_out else None,
        ttft_p50=_pct(ttft, 50), ttft_p95=_pct(ttft, 95), ttft_p99=_pct(ttft, 99),
        e2e_p50=_pct(e2e, 50), e2e_p95=_pct(e2e, 95), e2e_p99=_pct(e2e, 99),
        sla_violation_rate=float((served & ~met).sum() + rejected.sum()) / decided if decided else 0.0,
        window_s=float(horizon), overflow=overflow,
        utilization={k: v.utilization for k, v in pool_rows.items()}, pools=pool_rows,
    )
    return frame, summary


def summary_from_dict(data: dict[str, Any]) -> Summary:
    """Rebuild a Summary from its to_dict() form (for stored runs)."""
    pools = {k: PoolSummary(**v) for k, v in data["pools"].items()}
    return Summary(**{**data, "pools": pools})
