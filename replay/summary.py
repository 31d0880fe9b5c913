"""From simulator arrays to the per-request frame and the run summary.

Accounting: every request is exactly one of served, rejected or still queued (routed but not finished when
the replay stops, which only happens when the candidate sets drain_s). Percentiles are over served requests;
TPOT is (e2e - TTFT) / (out_tokens - 1) for requests with more than one output token. The SLA violation rate
counts served requests that missed their tier (degraded ones always do) plus rejected ones, over served +
rejected. Busy cost is the money of the replicas' busy time, shared among requests by the tokens each pass
computed; provisioned cost keeps every replica up for the whole window. cost_per_mtok divides busy cost by
served input + output tokens. Utilization is a pool's busy replica time over replicas x window; KV use is the
time-averaged share of the pool's KV cache held.

The predictor is named as the candidate set it, with its error over served requests in tokens (the median and
p90 of |predicted - true| output length) and as the ratio predicted / true (its p10, median and p90; a true
length of 0 counts as 1), whose median is its bias: above 1 it predicts long, below 1 short; with the mean of
predicted - true in tokens. (The median and p90 of |predicted - true| / true in percent are kept for runs stored
before: relative to very short true lengths they run to thousands of per cent.) A run that used the oracle says so
(`predictor_note`): its numbers are an upper bound no router can reach. Requests whose output
was stopped at a pool's context limit are `truncated`; their tokens and TPOT count what they generated.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import polars as pl

from replay import costmodel
from replay.plan import Plan
from replay.predictors import ORACLE_NOTE
from replay.simulator import DEGRADE, FLAG_NAMES, Raw

SLA_EPS = 1e-9  # predicted and simulated times agree to rounding; do not call that a miss


@dataclass(frozen=True)
class PoolSummary:
    """One pool's share of a run."""

    requests: int
    tokens_in: int
    tokens_out: int
    busy_cost_usd: float
    provisioned_cost_usd: float
    busy_s: float
    utilization: float
    kv_use: float = 0.0                  # mean KV held over capacity, over replicas x window
    kv_peak: float = 0.0                 # the most KV one replica held at once, over its capacity
    kv_p95: float = 0.0                  # 95 % of replica time held at most this share of KV (to 0.1 %)
    ttft_p50: float | None = None
    ttft_p99: float | None = None
    cached_tokens: int = 0               # prompt tokens its prefills reused from the prefix cache
    reuse: float | None = None           # cached_tokens over the prompt tokens of the requests it prefilled
    blocks_evicted: int = 0              # prefix blocks its replicas' caches evicted
    ttft_saved_s: float | None = None    # mean prefill compute per request the reuse skipped: the TTFT it saved
    busy_cost_saved_usd: float = 0.0     # the busy cost of that compute
    images: int = 0                      # images its encoders encoded (served requests)
    encode_s: float | None = None        # mean vision encoder seconds of a served request carrying images
    encode_share: float = 0.0            # the encoder's seconds over the pool's busy seconds


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
    busy_cost_usd: float
    provisioned_cost_usd: float
    cost_per_mtok: float | None
    ttft_p50: float | None
    ttft_p95: float | None
    ttft_p99: float | None
    tpot_p50: float | None
    tpot_p95: float | None
    tpot_p99: float | None
    e2e_p50: float | None
    e2e_p95: float | None
    e2e_p99: float | None
    sla_violation_rate: float
    window_s: float
    overflow: dict[str, int]
    utilization: dict[str, float]
    pools: dict[str, PoolSummary]
    kv_use: dict[str, float] = field(default_factory=dict)
    preempted: int = 0
    predictor: str = "oracle"                 # runs saved before predictors read the true lengths
    predictor_note: str = ORACLE_NOTE         # the oracle's caveat, empty for a predictor a router can run
    predictor_ape_p50: float | None = None    # % error of the predicted output length, over served requests
    predictor_ape_p90: float | None = None
    predictor_err_tokens_p50: float | None = None  # |predicted - true| output tokens, over served requests
    predictor_err_tokens_p90: float | None = None
    predictor_bias_tokens: float | None = None     # mean of predicted - true output tokens
    predictor_ratio_p10: float | None = None       # predicted / true output length (true 0 counts as 1)
    predictor_ratio_p50: float | None = None       # the bias: above 1 the predictor runs long, below 1 short
    predictor_ratio_p90: float | None = None
    truncated: int = 0
    failures: dict[str, int] = field(default_factory=dict)   # replica failures injected, per pool
    retried: int = 0                                         # requests retried after a failure (once or more)
    retries_missed_sla: int = 0                              # of those, served outside their SLA or not at all
    work_lost_tokens: int = 0                                # token positions computed, then lost in failures
    faults: dict[str, dict[str, Any]] = field(default_factory=dict)  # per pool, the figures replayed
    reuse: float | None = None               # prompt tokens served from prefix caches over all routed prompt tokens
    reuse_source: str = "recorded"           # replayed (blocks cached per replica), recorded (the trace's
    #                                          cached_tokens, taken as given), or mixed (some requests had blocks)
    # mean seconds of a served request's TTFT spent encoding its images, queued and in prefill (with its first
    # token's pass), when the traffic carries images; empty for text-only traffic
    ttft_split: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON."""
        return asdict(self)


def _percentile(values: np.ndarray, q: float) -> float | None:
    values = values[~np.isnan(values)]
    return float(np.percentile(values, q)) if values.size else None


def busy_by_replica(raw: Raw, horizon: float) -> list[tuple[int, int, float]]:
    """(pool, replica, busy seconds up to the horizon) of every replica."""
    out = []
    for pool, replica, spans in raw.spans:
        start, end = spans[0::2], spans[1::2]
        busy = float(np.clip(np.minimum(end, horizon) - np.minimum(start, horizon), 0, None).sum())
        out.append((pool, replica, busy))
    return out


def kv_quantile(hist: np.ndarray, replica_s: float, q: float) -> float:
    """The share of KV capacity that a fraction q of replica time held at most, from the busy seconds at each
    tenth of a percent (`hist`, its last bin capacity itself) and the replica seconds of the window (idle time holds
    none): the upper edge of the bin the quantile falls in."""
    counts = np.asarray(hist, dtype=np.float64).copy()
    counts[0] += max(replica_s - float(counts.sum()), 0.0)
    total = float(counts.sum())
    if total <= 0:
        return 0.0
    edges = len(counts) - 1
    return min(int(np.searchsorted(np.cumsum(counts), q * total)) + 1, edges) / edges


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
    out_tokens = plan.out_tokens
    if raw.truncated:
        out_tokens = out_tokens.copy()
        out_tokens[list(raw.truncated)] = list(raw.truncated.values())
    many = out_tokens > 1
    tpot = np.where(many, (raw.e2e - raw.ttft) / np.maximum(out_tokens - 1, 1), np.nan)
    pred = plan.pred_out
    err = (pred - plan.out_tokens).astype(np.float64)
    ratio = pred / np.maximum(plan.out_tokens, 1)
    ape = np.abs(err) / np.maximum(plan.out_tokens, 1) * 100.0
    names = [p.id for p in plan.pools]
    outcome = np.where(served, 0, np.where(queued, 2, 1))
    reasons = pl.Series("reason", [None] * n, dtype=pl.String)
    notes = {**{i: f"output stopped at {k} of {int(plan.out_tokens[i])} tokens: the context limit of pool "
                   f"{names[raw.decode_pool[i]]}" for i, k in raw.truncated.items()}, **raw.reasons}
    if notes:
        idx = sorted(notes)
        reasons = reasons.scatter(idx, [notes[i] for i in idx])
    codes = pl.DataFrame({"p": raw.pool, "d": raw.decode_pool, "f": raw.flag, "o": outcome, "keep": served,
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
        traffic.select(c for c in ("trace", "seq", "arrival_ms", "sla_tier", "model", "in_tokens", "out_tokens")
                       if c in traffic.columns),
        pl.DataFrame({"cached_tokens": pl.Series(raw.cached if raw.cached.size else plan.cached_tokens,
                                                 dtype=pl.Int64)}),
        pl.DataFrame({"pred_out_tokens": pl.Series(pred, dtype=pl.Int64)}),
        labels.select("pool"),
        pl.DataFrame({"replica": pl.Series(np.where(routed, raw.replica, 0), dtype=pl.Int64)}).select(
            pl.when(pl.Series(routed)).then(pl.col("replica")).alias("replica")),
        labels.select("decode_pool"),
        pl.DataFrame({name: np.where(served, values, nan) for name, values in (
            ("wait_s", raw.wait), ("ttft_s", raw.ttft), ("tpot_s", tpot), ("e2e_s", raw.e2e),
            ("cost_usd", raw.cost))}).fill_nan(None),
        pl.DataFrame({"preempted": raw.preempted,
                      "retries": raw.retried if raw.retried.size else np.zeros(n, dtype=np.int64)}),
        labels.select("sla_met", "overflow", "outcome"),
        reasons.to_frame(),
    ], how="horizontal")
    encode = raw.encode if raw.encode.size else np.zeros(n)
    if plan.image_tokens.size:  # TTFT in its parts: the encoder, the queues before the first token, the prefill
        frame = frame.with_columns(pl.Series("images", plan.images, dtype=pl.Int64),
                                   pl.Series("image_tokens", plan.image_tokens, dtype=pl.Int64),
                                   pl.Series("encode_s", np.where(served, encode, nan)).fill_nan(None),
                                   pl.Series("queue_s", raw.wait_first).fill_nan(None),
                                   pl.Series("prefill_s", np.where(served, raw.ttft - raw.wait_first - encode, nan)
                                             ).fill_nan(None))
    cached = raw.cached.astype(np.float64) if raw.cached.size else plan.cached_tokens
    prices = plan.prices
    saved_s = np.zeros(n)
    for k in range(len(plan.pools)):  # the compute each request's reuse skipped on the pool that prefilled it
        here = routed & (raw.pool == k)
        saved_s[here] = costmodel.reuse_seconds(plan.in_tokens[here], cached[here], float(prices.spt[k, 0]),
                                                float(prices.sctx[k, 0]))
    busy = np.zeros(len(plan.pools))
    for pool, _, seconds in busy_by_replica(raw, horizon):
        busy[pool] += seconds
    kv_peak = [float(raw.kv_peak[k] / spec.kv_capacity_tokens) if raw.kv_peak.size and spec.kv_capacity_tokens
               else 0.0 for k, spec in enumerate(plan.pools)]
    pool_rows = {}
    for k, spec in enumerate(plan.pools):
        mine = routed & (raw.pool == k)
        cap = spec.kv_capacity_tokens * spec.replicas * horizon
        served_here = served & (raw.pool == k)
        pool_rows[spec.id] = PoolSummary(
            requests=int(mine.sum()), tokens_in=int(plan.in_tokens[mine].sum()),
            tokens_out=int(out_tokens[mine].sum()),
            busy_cost_usd=float(costmodel.busy_cost(busy[k], spec)),
            provisioned_cost_usd=costmodel.provisioned_cost(spec, horizon), busy_s=float(busy[k]),
            utilization=float(busy[k] / (spec.replicas * horizon)) if horizon > 0 else 0.0,
            kv_use=float(raw.kv_time[k] / cap) if cap > 0 else 0.0,
            kv_peak=kv_peak[k],  # the p95 is a bin's upper edge: never above the peak itself
            kv_p95=min(kv_quantile(raw.kv_hist[k], spec.replicas * horizon, 0.95), kv_peak[k])
            if raw.kv_hist.size else 0.0,
            ttft_p50=_percentile(raw.ttft[served_here], 50), ttft_p99=_percentile(raw.ttft[served_here], 99),
            cached_tokens=int(cached[mine].sum()),
            reuse=float(cached[mine].sum() / plan.in_tokens[mine].sum()) if plan.in_tokens[mine].sum() else None,
            blocks_evicted=int(raw.evicted[k]) if raw.evicted else 0,
            ttft_saved_s=float(saved_s[mine].mean()) if mine.any() else None,
            busy_cost_saved_usd=float(saved_s[mine].sum() * spec.replica_cost_per_s),
            **_encoder(plan, encode, served & (raw.encoded_on == k) if raw.encoded_on.size else served_here,
                       float(busy[k])))
    served_in, served_out = int(plan.in_tokens[served].sum()), int(out_tokens[served].sum())
    busy_cost = float(sum(p.busy_cost_usd for p in pool_rows.values()))
    decided = int(served.sum() + rejected.sum())
    overflow = {name: int((raw.flag == code).sum()) for code, name in ((1, "queue"), (2, "degrade"))}
    overflow["reject"] = int(rejected.sum())
    ttft, e2e, tp = raw.ttft[served], raw.e2e[served], tpot[served]
    retried = raw.retried > 0 if raw.retried.size else np.zeros(n, dtype=bool)
    summary = Summary(
        candidate=candidate, policy=policy, seed=seed, requests=n, served=int(served.sum()),
        rejected=int(rejected.sum()), still_queued=int(queued.sum()),
        tokens_in=int(plan.in_tokens.sum()), tokens_out=int(plan.out_tokens.sum()),
        served_tokens_in=served_in, served_tokens_out=served_out, busy_cost_usd=busy_cost,
        provisioned_cost_usd=float(sum(p.provisioned_cost_usd for p in pool_rows.values())),
        cost_per_mtok=busy_cost / (served_in + served_out) * 1e6 if served_in + served_out else None,
        ttft_p50=_percentile(ttft, 50), ttft_p95=_percentile(ttft, 95), ttft_p99=_percentile(ttft, 99),
        tpot_p50=_percentile(tp, 50), tpot_p95=_percentile(tp, 95), tpot_p99=_percentile(tp, 99),
        e2e_p50=_percentile(e2e, 50), e2e_p95=_percentile(e2e, 95), e2e_p99=_percentile(e2e, 99),
        sla_violation_rate=float((served & ~met).sum() + rejected.sum()) / decided if decided else 0.0,
        window_s=float(horizon), overflow=overflow,
        utilization={k: v.utilization for k, v in pool_rows.items()}, pools=pool_rows,
        kv_use={k: v.kv_use for k, v in pool_rows.items()}, preempted=int(raw.preempted[routed].sum()),
        predictor=plan.predictor, predictor_note=plan.predictor_note, predictor_ape_p50=_percentile(ape[served], 50),
        predictor_ape_p90=_percentile(ape[served], 90), predictor_err_tokens_p50=_percentile(np.abs(err[served]), 50),
        predictor_err_tokens_p90=_percentile(np.abs(err[served]), 90),
        predictor_bias_tokens=float(err[served].mean()) if served.any() else None,
        predictor_ratio_p10=_percentile(ratio[served], 10), predictor_ratio_p50=_percentile(ratio[served], 50),
        predictor_ratio_p90=_percentile(ratio[served], 90), truncated=len(raw.truncated),
        failures={spec.id: raw.failures[k] for k, spec in enumerate(plan.pools)} if raw.failures else {},
        retried=int(retried.sum()), retries_missed_sla=int((retried & ~(served & met)).sum()),
        work_lost_tokens=int(raw.lost_tokens),
        reuse=float(cached[routed].sum() / plan.in_tokens[routed].sum()) if plan.in_tokens[routed].sum() else None,
        reuse_source=reuse_source(plan),
        ttft_split={"encode_s": float(encode[served].mean()), "queue_s": float(raw.wait_first[served].mean()),
                    "prefill_s": float((raw.ttft - raw.wait_first - encode)[served].mean())}
        if plan.image_tokens.size and served.any() else {},
    )
    return frame, summary


def _encoder(plan: Plan, encode: np.ndarray, served: np.ndarray, busy_s: float) -> dict[str, Any]:
    """A pool's vision encoder figures: images its encoder ran on for served requests (`served`: those it encoded),
    their mean encoder seconds, and the encoder's share of its busy time."""
    if not plan.image_tokens.size:
        return {}
    seeing = served & (plan.image_tokens > 0)
    return {"images": int(plan.images[served].sum()),
            "encode_s": float(encode[seeing].mean()) if seeing.any() else None,
            "encode_share": float(encode[served].sum() / busy_s) if busy_s > 0 else 0.0}


def reuse_source(plan: Plan) -> str:
    """Whether the run's prefix reuse was replayed per replica (every request had blocks), taken as the trace
    recorded it (none had), or both."""
    with_blocks = sum(1 for b in plan.block_tokens if b > 0)
    if with_blocks == 0:
        return "recorded"
    return "replayed" if with_blocks == plan.n else "mixed"


REUSE_SAID = {"recorded": "prefix reuse taken as the trace recorded it (cached_tokens), not simulated: the trace has "
                          "no prefix blocks",
              "replayed": "prefix reuse replayed: each replica caches the blocks its prefills computed",
              "mixed": "prefix reuse replayed for requests with prefix blocks, taken as recorded for the others"}


def summary_from_dict(data: dict[str, Any]) -> Summary:
    """Rebuild a Summary from its to_dict() form (for stored runs; those saved before predictors were replayed
    with the true output lengths, so they come back as the oracle's)."""
    pools = {k: PoolSummary(**v) for k, v in data["pools"].items()}
    return Summary(**{**data, "pools": pools})
