"""Request traffic shaped like the Azure LLM inference trace, served by the demo pools, with observed latencies.

Token counts come from lognormal fits of the Azure 2023 trace (Patel et al., "Splitwise", ISCA 2024, CC-BY
4.0), matched once to the median and 99th percentile of each file as listed in the corpus README
(sigma = ln(p99 / p50) / 2.326). Arrivals follow the fleet's diurnal load with Gamma-distributed minute-to-
minute bursts. Latencies follow the registry's roofline cost model (prefill compute-bound, decode
memory-bound), slowed by the pool's clock when it throttles and by queueing when load is high.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from app.demo.story import FATAL_POOL, LOAD_LEVEL, MINUTE_MS, PoolLayout, Signals, fatal_node_index, fleet_load


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
PEAK_RATE_PER_DEVICE = 0.1   # requests per second per serving device at the daily peak
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


def arrivals(rng: np.random.Generator, start_ms: int, end_ms: int, serving_devices: int) -> np.ndarray:
    """Arrival times (ms, sorted) following the diurnal load with bursty minutes."""
    minutes = np.arange(start_ms, end_ms, MINUTE_MS)
    rate = PEAK_RATE_PER_DEVICE * serving_devices * fleet_load(minutes) * 60
    burst = rng.gamma(BURST_SHAPE, 1 / BURST_SHAPE, size=len(minutes))
    counts = rng.poisson(rate * burst)
    at = np.repeat(minutes, counts) + rng.integers(0, MINUTE_MS, size=int(counts.sum()))
    return np.sort(at[at < end_ms])


def serve(layouts: list[PoolLayout], signals: dict[str, Signals], ts_ms: np.ndarray, interval_ms: int,
          start_ms: int, end_ms: int, rng: np.random.Generator) -> Served:
    """Draw the window's requests, route them and observe their latencies and outcomes."""
    pools = [lay for lay in layouts if lay.takes_traffic]
    at = arrivals(rng, start_ms, end_ms, sum(lay.pool.devices for lay in pools))
    n = len(at)
    code = rng.random(n) < CODE_SHARE
    ins_conv, outs_conv = _tokens(rng, n, CONVERSATION)
    ins_code, outs_code = _tokens(rng, n, CODE)
    ins, outs = np.where(code, ins_code, ins_conv), np.where(code, outs_code, outs_conv)
    tiers = np.array([t for t, _ in TIERS])[rng.choice(len(TIERS), size=n, p=[p for _, p in TIERS])]
    progress = (at - start_ms) / max(1, end_ms - start_ms)
    weights = np.column_stack([_weight(lay, pools, progress) for lay in pools])
    pick = (weights.cumsum(axis=1) / weights.sum(axis=1, keepdims=True) > rng.random(n)[:, None]).argmax(axis=1)
    step = np.clip((at - ts_ms[0]) // interval_ms, 0, len(ts_ms) - 1)
    pool_ids = np.array([lay.pool.id for lay in pools])[pick]
    models = np.array([lay.pool.serving.model for lay in pools if lay.pool.serving])[pick]
    replica = np.zeros(n, dtype=np.int64)
    ttft, e2e, queue = np.zeros(n), np.zeros(n), np.zeros(n)
    failed = np.zeros(n, dtype=bool)
    for k, lay in enumerate(pools):
        mine = pick == k
        m = int(mine.sum())
        serving = lay.pool.serving
        assert serving is not None
        replica[mine] = rng.integers(0, serving.replicas, size=m)
        sig = signals[lay.pool.id]
        load = fleet_load(at[mine]) * LOAD_LEVEL.get(lay.pool.id, 0.8)
        slow = 1.0 / np.maximum(sig.clock_ratio[step[mine]], 0.3)
        queue[mine] = rng.exponential(0.03 + 4.0 * np.maximum(0.0, load - 0.6) ** 2, m)
        prefill, per_token = _roofline(lay)
        ttft[mine] = queue[mine] + prefill * ins[mine] * slow * rng.lognormal(0, 0.2, m)
        e2e[mine] = ttft[mine] + outs[mine] * per_token * slow * (1 + 0.6 * load) * rng.lognormal(0, 0.1, m)
        if lay.pool.id == FATAL_POOL:
            bad_replica = (fatal_node_index(lay) + 1) * lay.devices_per_node - 1
            bad_replica //= serving.devices_per_replica
            failed[mine] = sig.outage[step[mine]] & (replica[mine] == bad_replica)
    abort = ~failed & (rng.random(n) < 0.004)
    length = outs >= np.where(code, CODE.out_max, CONVERSATION.out_max)
    reason = np.where(failed, "error", np.where(abort, "abort", np.where(length, "length", "stop")))
    # an aborted request is cut off while it decodes; a failed one ends before its first token
    e2e = np.where(failed, rng.uniform(0.02, 0.2, n), np.where(abort, ttft + (e2e - ttft) * rng.uniform(0.1, 0.9, n),
                                                                 e2e))
    frame = pl.DataFrame({
        "arrival_ms": at, "in_tokens": ins, "out_tokens": outs, "cached_tokens": np.zeros(n, dtype=np.int64),
        "sla_tier": tiers, "model": models, "obs_pool": pool_ids,
        "obs_ttft_s": np.where(failed, np.nan, np.round(ttft, 4)), "obs_e2e_s": np.round(e2e, 4),
        "outcome": np.where(failed, "error", np.where(abort, "abort", "ok")),
    }).with_columns(pl.col("obs_ttft_s").fill_nan(None))
    return Served(frame, replica, queue, reason)


def _weight(lay: PoolLayout, pools: list[PoolLayout], progress: np.ndarray) -> np.ndarray:
    """Routing weight of a pool per request: models by capacity, canaries ramping from 5 % to 15 % of theirs."""
    assert lay.pool.serving is not None
    model = lay.pool.serving.model
    peers = [p for p in pools if p.pool.serving and p.pool.serving.model == model]
    share = sum(p.pool.devices for p in peers) / sum(p.pool.devices for p in pools)
    canaries = [p for p in peers if p.pool.onboarding.stage == "canary"]
    canary_share = np.minimum(0.05 + 0.10 * progress, 1.0) if len(canaries) < len(peers) else np.ones_like(progress)
    if lay in canaries:
        return share * canary_share / len(canaries)
    production = [p for p in peers if p not in canaries]
    power = {p.pool.id: p.chip.peak_tflops_bf16 * p.pool.devices for p in production}
    rest = 1 - canary_share if canaries else np.ones_like(progress)
    return share * rest * power[lay.pool.id] / sum(power.values())


def _roofline(lay: PoolLayout) -> tuple[float, float]:
    """Seconds per prompt token (compute-bound prefill) and per output token (memory-bound decode) of a replica."""
    assert lay.model is not None and lay.pool.serving is not None
    width = lay.pool.serving.devices_per_replica
    cm, chip, active = lay.pool.cost_model, lay.chip, lay.model.active_params_b * 1e9
    prefill = 2 * active / (chip.peak_tflops_bf16 * 1e12 * cm.mfu * width)
    decode = active * lay.model.bytes_per_param / (chip.hbm_bw_tbps * 1e12 * cm.mem_bw_eff * width)
    return prefill, decode


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
    f = served.frame
    mine = (f["obs_pool"].to_numpy() == lay.pool.id) & (served.replica == replica)
    at = f["arrival_ms"].to_numpy()[mine].astype(float)
    ttft = f["obs_ttft_s"].fill_null(np.nan).to_numpy()[mine]
    e2e = f["obs_e2e_s"].to_numpy()[mine]
    ins = f["in_tokens"].to_numpy()[mine].astype(float)
    outs = f["out_tokens"].to_numpy()[mine].astype(float)
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
