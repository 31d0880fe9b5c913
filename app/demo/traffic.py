"""Request traffic shaped like the Azure LLM inference trace, served by the demo pools, with observed latencies.

Token counts come from lognormal fits of the Azure 2023 trace (Patel et al., "Splitwise", ISCA 2024, CC-BY
4.0), matched once to the median and 99th percentile of each file as listed in the corpus README
(sigma = ln(p99 / p50) / 2.326). Each pool's arrivals follow its target busy share (story.target_busy) with
Gamma-distributed minute-to-minute bursts: a replica whose requests take s seconds alone, arriving at rate
lambda, is busy about 1 - exp(-lambda s) of the time, so lambda = -ln(1 - busy) / s per replica.

The requests are then served by the replay's own model of continuously batching replicas (policy
`observed`: each request on the pool it was drawn for), at the per-pool coefficients planted in
story.PLANTED. Observed TTFT and time per output token are the model's times with 3 % lognormal measurement
noise, and a device's utilization telemetry is the share of each scrape interval its replica was busy, so the
requests, the engines' counters and the device telemetry tell one story that `hetpool replay calibrate`
can recover.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import polars as pl

from app.demo.chunks import Progress, replay_in_chunks
from app.demo.story import (
    FATAL_POOL,
    MINUTE_MS,
    PLANTED,
    PoolLayout,
    Signals,
    device_signals,
    fatal_node_index,
    target_busy,
)
from pool_registry import CostModel, Registry
from replay import Candidate, PoolOverride, encode
from replay.costmodel import step_model
from replay.fleet import PoolSpec, pools_by_id


@dataclass(frozen=True)
class TokenFit:
    """Lognormal prompt and output token counts of one workload, with the trace's maxima as caps."""

    in_median: float
    in_sigma: float
    in_max: int
    out_median: float
    out_sigma: float
    out_max: int


CONVERSATION = TokenFit(1020, 0.602, 14050, 129, 0.662, 1000)  # p50/p99: 1020/4142 in, 129/601 out
CODE = TokenFit(1469, 0.697, 7437, 13, 1.266, 1899)            # p50/p99: 1469/7436 in, 13/249 out
CODE_SHARE = 8819 / (8819 + 19366)                              # requests in the code vs conversation files
# images per request on a vision-language pool, and their shares: an assumed chat mix (no public trace gives one),
# most turns with one picture, a few with several, some text alone
IMAGES = ((0, 0.3), (1, 0.5), (2, 0.15), (4, 0.05))
NOISE = 0.03                 # lognormal spread of the measurement noise on TTFT and time per output token
BURST_SHAPE = 4.0            # Gamma shape of the per-minute rate multiplier (coefficient of variation 0.5)
TIERS = (("standard", 0.7), ("premium", 0.15), ("batch", 0.15))
TRACE = "hetpool-demo"


@dataclass(frozen=True)
class Served:
    """Every request of the window with what was observed; arrays are aligned, sorted by arrival."""

    frame: pl.DataFrame      # the requests table's columns, ready for the project's CSV traffic format
    replica: np.ndarray      # replica index within its pool
    queue_s: np.ndarray
    reason: np.ndarray       # finished_reason: stop, length, abort, error


def _tokens(rng: np.random.Generator, n: int, fit: TokenFit) -> tuple[np.ndarray, np.ndarray]:
    ins = np.clip(np.round(rng.lognormal(np.log(fit.in_median), fit.in_sigma, n)), 2, fit.in_max)
    outs = np.clip(np.round(rng.lognormal(np.log(fit.out_median), fit.out_sigma, n)), 1, fit.out_max)
    return ins.astype(np.int64), outs.astype(np.int64)


def arrivals(rng: np.random.Generator, start_ms: int, end_ms: int, rate_per_s: np.ndarray) -> np.ndarray:
    """Arrival times (ms, sorted) at a per-minute rate with bursty minutes."""
    minutes = np.arange(start_ms, end_ms, MINUTE_MS)
    burst = rng.gamma(BURST_SHAPE, 1 / BURST_SHAPE, size=len(minutes))
    counts = rng.poisson(rate_per_s * 60 * burst)
    at = np.repeat(minutes, counts) + rng.integers(0, MINUTE_MS, size=int(counts.sum()))
    return np.sort(at[at < end_ms])


def planted_registry(layouts: list[PoolLayout]) -> Registry:
    """The demo fleet as a registry, with the planted coefficients and step overheads of the serving pools."""
    pools = []
    for lay in layouts:
        pool = lay.pool
        if pool.id in PLANTED and pool.serving is not None:
            mfu, eff, overhead = PLANTED[pool.id]
            pool = dataclasses.replace(pool, cost_model=CostModel(mfu, eff),
                                       serving=dataclasses.replace(pool.serving, step_overhead_ms=overhead))
        pools.append(pool)
    chips = tuple({lay.chip.id: lay.chip for lay in layouts}.values())
    models = tuple({lay.model.id: lay.model for lay in layouts if lay.model is not None}.values())
    return Registry(name="demo", chips=chips, models=models, pools=tuple(pools))


def _one_request_seconds(spec: PoolSpec, ins: np.ndarray, outs: np.ndarray) -> float:
    """Mean busy seconds of one request alone on a replica: its prefill pass, then one pass per output token."""
    step = step_model(spec)
    alone = step.weight_bytes_read(1.0) * step.s_per_byte + step.overhead_s
    prefill = np.maximum(ins * step.s_per_token + step.overhead_s, alone)
    return float(np.mean(prefill + (outs - 1) * alone))


def _mixture(rng: np.random.Generator, n: int, code: np.ndarray, spec: PoolSpec,
             image_tokens: np.ndarray | int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Token counts of the code/conversation mixture, prompts cut so that every request (with its images' tokens)
    fits the KV cache."""
    ins_conv, outs_conv = _tokens(rng, n, CONVERSATION)
    ins_code, outs_code = _tokens(rng, n, CODE)
    ins, outs = np.where(code, ins_code, ins_conv), np.where(code, outs_code, outs_conv)
    room = min(spec.kv_capacity_tokens, spec.model.max_context) - outs - image_tokens
    return np.clip(ins, 2, np.maximum(room, 2)), outs


def _images(rng: np.random.Generator, n: int, spec: PoolSpec) -> tuple[np.ndarray, np.ndarray, float]:
    """Images per request (none on a text-only pool), the prompt tokens they become, and the encoder's seconds per
    image on one of the pool's replicas."""
    vision = spec.model.vision
    if vision is None:
        return np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64), 0.0
    counts = rng.choice([k for k, _ in IMAGES], size=n, p=[w for _, w in IMAGES]).astype(np.int64)
    per_image = encode.seconds_per_patch(step_model(spec), spec.model) * vision.patches_per_image
    return counts, counts * vision.tokens_per_image, per_image


def _pool_traffic(lay: PoolLayout, spec: PoolSpec, rng: np.random.Generator, start_ms: int,
                  end_ms: int) -> pl.DataFrame:
    """One pool's requests: arrivals at its target busy share, Azure-shaped tokens that fit its KV cache."""
    assert lay.model is not None
    minutes = np.arange(start_ms, end_ms, MINUTE_MS)
    sample = 4000
    images_s, image_tokens_s, per_image = _images(rng, sample, spec)
    ins_s, outs_s = _mixture(rng, sample, rng.random(sample) < CODE_SHARE, spec, image_tokens_s)
    service = (_one_request_seconds(spec, (ins_s + image_tokens_s).astype(float), outs_s.astype(float))
               + per_image * float(images_s.mean()))
    busy = target_busy(lay.pool.id, minutes, (minutes - start_ms) / max(1, end_ms - start_ms))
    at = arrivals(rng, start_ms, end_ms, -np.log1p(-busy) / service * spec.replicas)
    n = len(at)
    code = rng.random(n) < CODE_SHARE
    images, image_tokens, _ = _images(rng, n, spec)
    ins, outs = _mixture(rng, n, code, spec, image_tokens)
    tiers = np.array([t for t, _ in TIERS])[rng.choice(len(TIERS), size=n, p=[p for _, p in TIERS])]
    return pl.DataFrame({"arrival_ms": at, "in_tokens": ins, "out_tokens": outs,
                         "cached_tokens": np.zeros(n, dtype=np.int64), "sla_tier": tiers, "model": lay.model.id,
                         "obs_pool": lay.pool.id, "code": code, "images": images})


def busy_share(busy: pl.DataFrame, replica: int, grid: np.ndarray, interval_ms: int) -> np.ndarray:
    """Share of each scrape interval [g, g + interval) during which the replica was busy."""
    mine = busy.filter(pl.col("replica") == replica).sort("start_ms")
    start, end = mine["start_ms"].to_numpy(), mine["end_ms"].to_numpy()
    if len(start) == 0:
        return np.zeros(len(grid))
    edges = np.append(grid, grid[-1] + interval_ms).astype(float)
    cum = np.concatenate([[0.0], np.cumsum(end - start)])
    k = np.searchsorted(start, edges, side="right")  # spans begun by each edge
    last = np.maximum(k - 1, 0)
    # busy time before an edge: every span begun before it, less what of the last one lies after it
    before = cum[k] - np.where(k > 0, np.clip(end[last] - edges, 0, None), 0.0)
    return np.clip(np.diff(before) / interval_ms, 0.0, 1.0)


def demo_candidate(layouts: list[PoolLayout]) -> Candidate:
    """What serves the demo's requests: each on the pool it was drawn for, the serving pools without traffic off."""
    keep = {lay.pool.id for lay in layouts if lay.takes_traffic}
    return Candidate(name="demo", policy="observed", pools={
        lay.pool.id: PoolOverride(enabled=False) for lay in layouts if lay.pool.id not in keep and lay.pool.serving})


def draw_traffic(layouts: list[PoolLayout], fleet: Registry, candidate: Candidate, rng: np.random.Generator,
                 start_ms: int, end_ms: int) -> pl.DataFrame:
    """Every pool's requests in arrival order, numbered from 0 (`seq`), with whether each is a code request."""
    specs = pools_by_id(fleet, candidate)
    pools = [lay for lay in layouts if lay.takes_traffic]
    return pl.concat([_pool_traffic(lay, specs[lay.pool.id], rng, start_ms, end_ms) for lay in pools]).sort(
        "arrival_ms", maintain_order=True).with_row_index("seq").with_columns(pl.col("seq").cast(pl.Int64))


def serve(layouts: list[PoolLayout], signals: dict[str, Signals], ts_ms: np.ndarray, interval_ms: int,
          start_ms: int, end_ms: int, rng: np.random.Generator, progress: Progress | None = None) -> Served:
    """Draw the window's requests, serve them on the model at the planted coefficients, observe them.

    The requests are served a chunk of the window at a time (app.demo.chunks). The serving pools' device
    signals are drawn again, in place, from their replicas' busy time. `progress` hears of each chunk.
    """
    say = progress or (lambda _f, _m: None)
    pools = [lay for lay in layouts if lay.takes_traffic]
    fleet, candidate = planted_registry(layouts), demo_candidate(layouts)
    say(0.0, "drawing the requests")
    traffic = draw_traffic(layouts, fleet, candidate, rng, start_ms, end_ms)
    result = replay_in_chunks(candidate, traffic.drop("code"), fleet, start_ms, end_ms,
                              lambda f, what: say(0.9 * f, what))
    rows = result.requests
    n = rows.height
    assert n == traffic.height, f"{n} of {traffic.height} requests served"
    replica = rows["replica"].fill_null(0).to_numpy()
    outs = rows["out_tokens"].to_numpy()
    ttft = rows["ttft_s"].to_numpy() * rng.lognormal(0, NOISE, n)
    tpot = rows["tpot_s"].fill_null(0.0).to_numpy() * rng.lognormal(0, NOISE, n)
    e2e = ttft + tpot * np.maximum(outs - 1, 0)
    for lay in pools:  # device telemetry from the replicas' busy time
        assert lay.pool.serving is not None
        say(0.9 + 0.1 * pools.index(lay) / len(pools), f"{lay.pool.id}'s devices under the requests")
        width = lay.pool.serving.devices_per_replica
        busy = np.zeros((len(ts_ms), lay.pool.devices))
        mine = result.busy.filter(pl.col("pool") == lay.pool.id)
        for r in range(lay.pool.serving.replicas):
            busy[:, r * width:(r + 1) * width] = busy_share(mine, r, ts_ms, interval_ms)[:, None]
        signals[lay.pool.id] = device_signals(lay, ts_ms, interval_ms, rng, busy=busy)
    step = np.clip((rows["arrival_ms"].to_numpy() - ts_ms[0]) // interval_ms, 0, len(ts_ms) - 1)
    pool_ids = rows["pool"]  # a Polars column: as numpy it would be a Python string per request
    failed = np.zeros(n, dtype=bool)
    for lay in pools:
        if lay.pool.id == FATAL_POOL and lay.pool.serving is not None:
            bad = ((fatal_node_index(lay) + 1) * lay.devices_per_node - 1) // lay.pool.serving.devices_per_replica
            failed |= (pool_ids == lay.pool.id).to_numpy() & signals[lay.pool.id].outage[step] & (replica == bad)
    code = traffic["code"].to_numpy()
    abort = ~failed & (rng.random(n) < 0.004)
    length = outs >= np.where(code, CODE.out_max, CONVERSATION.out_max)
    reason = np.where(failed, "error", np.where(abort, "abort", np.where(length, "length", "stop")))
    # an aborted request is cut off while it decodes; a failed one ends before its first token
    e2e = np.where(failed, rng.uniform(0.02, 0.2, n), np.where(abort, ttft + (e2e - ttft) * rng.uniform(0.1, 0.9, n),
                                                                 e2e))
    frame = pl.DataFrame({
        "arrival_ms": rows["arrival_ms"], "in_tokens": rows["in_tokens"], "out_tokens": rows["out_tokens"],
        "cached_tokens": rows["cached_tokens"], "sla_tier": rows["sla_tier"], "model": rows["model"],
        "images": rows["images"],
        "obs_pool": pool_ids, "obs_ttft_s": np.where(failed, np.nan, np.round(ttft, 4)),
        "obs_e2e_s": np.round(e2e, 4), "outcome": np.where(failed, "error", np.where(abort, "abort", "ok")),
    }).with_columns(pl.col("obs_ttft_s").fill_nan(None),
                    # dictionary-encoded: four bytes a request instead of a string each, for millions of requests
                    pl.col("sla_tier", "model", "obs_pool", "outcome").cast(pl.Categorical))
    return Served(frame, replica, rows["wait_s"].fill_null(0.0).to_numpy(), reason)


@dataclass(frozen=True)
class EngineSeries:
    """One engine's cumulative counters and gauges on its scrape grid."""

    pool: str
    replica: int
    node_index: int
    running: np.ndarray
    waiting: np.ndarray
    kv_usage: np.ndarray
    prompt_tokens: np.ndarray
    generation_tokens: np.ndarray
    finished: dict[str, np.ndarray]
    ttft: tuple[np.ndarray, np.ndarray, np.ndarray]
    e2e: tuple[np.ndarray, np.ndarray, np.ndarray]


def _upto(times: np.ndarray, values: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """Sum of values whose time is at or before each grid point."""
    order = np.argsort(times, kind="stable")
    csum = np.concatenate([[0.0], np.cumsum(values[order])])
    return csum[np.searchsorted(times[order], grid, side="right")]


def _histogram(times: np.ndarray, obs: np.ndarray, bounds: tuple[float, ...], grid: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Cumulative bucket counts (grid x bounds), sum and count of observations made by each grid point."""
    buckets = np.column_stack([_upto(times, (obs <= b).astype(float), grid) for b in bounds])
    return buckets, _upto(times, obs, grid), _upto(times, np.ones_like(obs), grid)


def engine_series(lay: PoolLayout, served: Served, replica: int, grid: np.ndarray,
                  ttft_bounds: tuple[float, ...], e2e_bounds: tuple[float, ...]) -> EngineSeries:
    """What the engine of one replica counted by each of its scrapes."""
    serving = lay.pool.serving
    assert serving is not None
    # a mask from Polars' own comparison: the pool column as a numpy array would be a Python string per request
    mine = (served.frame["obs_pool"] == lay.pool.id).to_numpy() & (served.replica == replica)
    f = served.frame.filter(pl.Series(mine))
    at = f["arrival_ms"].to_numpy().astype(float)
    ttft = f["obs_ttft_s"].fill_null(np.nan).to_numpy()
    e2e = f["obs_e2e_s"].to_numpy()
    ins = f["in_tokens"].to_numpy().astype(float)
    if lay.model is not None and lay.model.vision is not None and "images" in f.columns:  # an engine counts the
        ins = ins + f["images"].to_numpy() * lay.model.vision.tokens_per_image        # images' tokens as prompt
    outs = f["out_tokens"].to_numpy().astype(float)
    reason = served.reason[mine]
    queue = served.queue_s[mine]
    first = ~np.isnan(ttft)
    t_first = at + np.nan_to_num(ttft) * 1000
    t_done = at + e2e * 1000
    arrived = _upto(at, np.ones_like(at), grid)
    done = _upto(t_done, np.ones_like(at), grid)
    queued = _upto(at + queue * 1000, np.ones_like(at), grid)
    running = np.maximum(0, queued - done)
    ok = reason != "error"
    return EngineSeries(
        pool=lay.pool.id, replica=replica,
        node_index=replica * serving.devices_per_replica // lay.devices_per_node,
        running=running, waiting=np.maximum(0, arrived - queued),
        kv_usage=np.clip(running / serving.max_concurrency * 0.9, 0, 0.98),
        prompt_tokens=_upto(t_first[first], ins[first], grid),
        generation_tokens=_upto(t_done[ok], np.where(reason[ok] == "abort", outs[ok] // 2, outs[ok]), grid),
        finished={r: _upto(t_done[reason == r], np.ones(int((reason == r).sum())), grid)
                  for r in ("stop", "length", "abort", "error")},
        ttft=_histogram(t_first[first], ttft[first], ttft_bounds, grid),
        e2e=_histogram(t_done, e2e, e2e_bounds, grid),
    )
