"""What a page draws from a replay: per-pool utilization, KV use and routing share over time, latency CDFs.

Utilization is exact: each replica's busy spans cut into time buckets, over replicas x bucket length (the last
bucket ends with the run). KV use
over time is estimated from each served request's life: from admission (arrival + wait) to its first token
it holds its prompt, then its cache grows by one token per output token until it finishes (preemptions are
left out), over the pool's KV capacity; its average over the run agrees with the summary's exact KV use to
within a few per cent. Routing share is the share of a bucket's arrivals each pool served (rejected ones
count as "rejected").
"""

from __future__ import annotations

import numpy as np
import polars as pl

from replay.engine import ReplayResult
from replay.fleet import PoolSpec

REJECTED = "rejected"
CHUNK = 50_000          # requests evaluated at once, so a long run does not need requests x buckets memory
MEASURES = {"ttft_s": "TTFT", "tpot_s": "TPOT", "e2e_s": "e2e"}
TIMELINE_SCHEMA = {"t": pl.Int64, "pool": pl.String, "utilization": pl.Float64, "kv_use": pl.Float64,
                   "share": pl.Float64, "requests": pl.Int64}


def bucket_ms(window_s: float, buckets: int = 60) -> int:
    """A round bucket length giving about `buckets` buckets over the window (at least one second)."""
    raw = max(1.0, window_s / buckets)
    for step in (1, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 86400):
        if step >= raw:
            return step * 1000
    return int(raw) * 1000


def _overlap(start: np.ndarray, end: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """(buckets,) total overlap in ms of the intervals [start, end) with each bucket of edges."""
    out = np.zeros(edges.size - 1)
    for k in range(0, start.size, CHUNK):
        s, e = start[k:k + CHUNK, None], end[k:k + CHUNK, None]
        out += np.clip(np.minimum(e, edges[None, 1:]) - np.maximum(s, edges[None, :-1]), 0, None).sum(axis=0)
    return out


def _ramp(start: np.ndarray, end: np.ndarray, lo: np.ndarray, hi: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """(buckets,) integral in token-ms of a value rising linearly from lo at start to hi at end, per bucket."""
    out = np.zeros(edges.size - 1)
    for k in range(0, start.size, CHUNK):
        s, e = start[k:k + CHUNK, None], end[k:k + CHUNK, None]
        a, b = lo[k:k + CHUNK, None], hi[k:k + CHUNK, None]
        x0 = np.clip(edges[None, :-1], s, e)
        x1 = np.clip(edges[None, 1:], s, e)
        slope = np.where(e > s, (b - a) / np.where(e > s, e - s, 1.0), 0.0)
        mid = (x0 + x1) / 2.0
        out += ((a + slope * (mid - s)) * (x1 - x0)).sum(axis=0)
    return out


def pool_timeline(result: ReplayResult, pools: tuple[PoolSpec, ...], step_ms: int | None = None) -> pl.DataFrame:
    """One row per time bucket and pool: utilization, estimated KV use, share and count of the arrivals."""
    req = result.requests
    if req.height == 0:
        return pl.DataFrame(schema=TIMELINE_SCHEMA)
    t0 = int(req["arrival_ms"].min())  # type: ignore[arg-type]
    step = step_ms or bucket_ms(result.summary.window_s)
    n_buckets = max(1, int(np.ceil(result.summary.window_s * 1000 / step)))
    # the last bucket ends with the run, so a part-filled bucket is not drawn as a drop
    edges = np.minimum(t0 + step * np.arange(n_buckets + 1, dtype=np.float64), t0 + result.summary.window_s * 1000)
    length = np.maximum(np.diff(edges), 1.0)
    bucket = ((req["arrival_ms"] - t0) // step).clip(0, n_buckets - 1).alias("b")
    counts = req.select(bucket, pl.col("pool").fill_null(REJECTED)).group_by("b", "pool").len()
    total = counts.group_by("b").agg(pl.col("len").sum().alias("all"))
    counts = counts.join(total, on="b")
    served = req.filter(pl.col("outcome") == "served")
    rows = []
    for spec in [*pools, None]:
        name = spec.id if spec else REJECTED
        mine = counts.filter(pl.col("pool") == name)
        share = np.zeros(n_buckets)
        n = np.zeros(n_buckets, dtype=np.int64)
        share[mine["b"].to_numpy()] = (mine["len"] / mine["all"]).to_numpy()
        n[mine["b"].to_numpy()] = mine["len"].to_numpy()
        util = np.full(n_buckets, np.nan)
        kv = np.full(n_buckets, np.nan)
        if spec is not None:
            spans = result.busy.filter(pl.col("pool") == name)
            util = _overlap(spans["start_ms"].to_numpy(), spans["end_ms"].to_numpy(), edges) / (
                spec.replicas * length)
            kv = _kv_tokens_ms(served.filter(pl.col("pool") == name), edges) / (
                max(1.0, float(spec.kv_capacity_tokens) * spec.replicas) * length)
        elif not n.any():
            continue
        rows.append(pl.DataFrame({"t": edges[:-1].astype(np.int64), "pool": name, "utilization": util,
                                  "kv_use": kv, "share": share, "requests": n}, schema=TIMELINE_SCHEMA))
    return pl.concat(rows).with_columns(pl.col("utilization", "kv_use").fill_nan(None))


def _kv_tokens_ms(rows: pl.DataFrame, edges: np.ndarray) -> np.ndarray:
    """KV tokens held x ms per bucket by served requests of one pool (see the module docstring)."""
    arrival = rows["arrival_ms"].to_numpy().astype(np.float64)
    admit = arrival + rows["wait_s"].to_numpy() * 1000.0
    first = arrival + rows["ttft_s"].to_numpy() * 1000.0
    done = arrival + rows["e2e_s"].to_numpy() * 1000.0
    prompt = rows["in_tokens"].to_numpy().astype(np.float64)
    out = rows["out_tokens"].to_numpy().astype(np.float64)
    first = np.clip(first, admit, done)
    return _ramp(admit, first, prompt, prompt, edges) + _ramp(first, done, prompt + 1, prompt + out, edges)


def latency_cdf(requests: pl.DataFrame, points: int = 101) -> pl.DataFrame:
    """Quantiles of TTFT, TPOT and e2e of served requests at `points` evenly spaced levels: measure, q, value."""
    parts = []
    levels = np.linspace(0.0, 1.0, points)
    for column, name in MEASURES.items():
        values = requests[column].drop_nulls().to_numpy()
        if values.size:
            parts.append(pl.DataFrame({"measure": name, "q": levels, "value": np.quantile(values, levels)}))
    return pl.concat(parts) if parts else pl.DataFrame(schema={"measure": pl.String, "q": pl.Float64,
                                                                "value": pl.Float64})
