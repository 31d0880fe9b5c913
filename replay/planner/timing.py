"""A layout as the replay sees it (a PoolSpec), timed closed-loop exactly as `hetpool replay bench` times it.

The coefficients are the pool's own: its cost model (mfu, mem_bw_eff, mfu_decode, collective_us, serial_share)
and its serving block's engine overheads, which `hetpool replay calibrate` fits; a calibrated candidate's pool
overrides take their place when given. A pool without a serving block plans with the engine defaults and no overheads.
"""

from __future__ import annotations

from dataclasses import dataclass

from pool_registry import Pool, Registry
from pool_registry.model import SCHEDULES
from replay.bench import BenchPoint, closed_loop, default_requests
from replay.candidate import Candidate
from replay.fleet import PoolSpec
from replay.planner.layouts import Layout
from replay.planner.memory import Engine


@dataclass(frozen=True)
class Coefficients:
    """The step model's coefficients of one pool."""

    mfu: float
    mem_bw_eff: float
    mfu_decode: float | None = None
    collective_us: float | None = None
    step_overhead_ms: float = 0.0
    seq_overhead_us: float = 0.0
    serial_share: float = 0.0
    chunk_overhead_us: float = 0.0


def engine_of(pool: Pool) -> Engine:
    """The memory-relevant engine settings of the pool's serving block, else vLLM's defaults."""
    s = pool.serving
    if s is None:
        return Engine()
    return Engine(s.gpu_memory_utilization, s.kv_cache_dtype, s.max_num_batched_tokens)


def coefficients_of(pool: Pool, candidate: Candidate | None = None) -> Coefficients:
    """The pool's coefficients from the registry, with a (calibrated) candidate's overrides applied."""
    c, s = pool.cost_model, pool.serving
    base = Coefficients(c.mfu, c.mem_bw_eff, c.mfu_decode, c.collective_us,
                        s.step_overhead_ms if s else 0.0, s.seq_overhead_us if s else 0.0, c.serial_share,
                        s.chunk_overhead_us if s else 0.0)
    if candidate is None:
        return base
    o = candidate.override(pool.id)
    return Coefficients(
        mfu=o.mfu or base.mfu, mem_bw_eff=o.mem_bw_eff or base.mem_bw_eff,
        mfu_decode=o.mfu_decode or base.mfu_decode,
        collective_us=base.collective_us if o.collective_us is None else o.collective_us,
        step_overhead_ms=base.step_overhead_ms if o.step_overhead_ms is None else o.step_overhead_ms,
        seq_overhead_us=base.seq_overhead_us if o.seq_overhead_us is None else o.seq_overhead_us,
        serial_share=base.serial_share if o.serial_share is None else o.serial_share,
        chunk_overhead_us=base.chunk_overhead_us if o.chunk_overhead_us is None else o.chunk_overhead_us)


def spec_of(registry: Registry, pool: Pool, model_id: str, layout: Layout, concurrency: int,
            coefficients: Coefficients) -> PoolSpec:
    """The PoolSpec `replay bench` would resolve from the serving block this layout writes."""
    engine = engine_of(pool)
    s = pool.serving
    return PoolSpec(
        id=pool.id, chip=registry.chip_of(pool), model=registry.model(model_id), replicas=layout.replicas,
        devices_per_replica=layout.devices_per_replica, max_concurrency=concurrency,
        max_queue=s.max_queue if s else 1024, mfu=coefficients.mfu, mem_bw_eff=coefficients.mem_bw_eff,
        hourly_cost_per_device=pool.hourly_cost_per_device, pp=layout.pp,
        max_num_batched_tokens=max(engine.max_num_batched_tokens, concurrency),
        gpu_memory_utilization=engine.gpu_memory_utilization, kv_cache_dtype=engine.kv_cache_dtype,
        step_overhead_ms=coefficients.step_overhead_ms, seq_overhead_us=coefficients.seq_overhead_us,
        mfu_decode=coefficients.mfu_decode, collective_us=coefficients.collective_us, ep=layout.ep,
        attention_dp=layout.attention_dp,
        serial_share=coefficients.serial_share, chunk_overhead_us=coefficients.chunk_overhead_us,
        devices_per_node=pool.devices_per_node, network=pool.network,
        # how its engine schedules (SGLang's prefill-first, a pass composed ahead) stays the pool's
        schedule=s.schedule if s else SCHEDULES[0], async_scheduling=s.async_scheduling if s else False)


def time_layout(spec: PoolSpec, concurrency: int, isl: int, osl: int, requests: int | None = None) -> BenchPoint:
    """`replay bench`'s closed loop at one concurrency, with its default number of requests unless given."""
    return closed_loop(spec, concurrency, isl, osl, requests or default_requests(concurrency))
