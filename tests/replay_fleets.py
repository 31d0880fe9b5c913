"""Small fleets built in code for replay tests, so every number in an assertion can be derived by hand."""

from __future__ import annotations

import numpy as np
import polars as pl

from pool_registry import (
    Assignment,
    Chip,
    CostModel,
    Interconnect,
    Model,
    Onboarding,
    Pool,
    Registry,
    Serving,
)


def chip(chip_id: str = "chip", *, tflops: float = 1000.0, hbm_gb: float = 80.0, bw_tbps: float = 4.0,
         link_gbps: float = 100.0) -> Chip:
    """A chip with round numbers."""
    return Chip(id=chip_id, vendor="test", name=chip_id, peak_tflops_bf16=tflops, hbm_capacity_gb=hbm_gb,
                hbm_bw_tbps=bw_tbps, interconnect=Interconnect("test", link_gbps), supported_dtypes=("bf16",))


def model(model_id: str = "m", *, params_b: float = 10.0, active_b: float | None = None, bpp: float = 2.0,
          layers: int = 10, kv_heads: int = 8, head_dim: int = 128, max_context: int = 1_000_000) -> Model:
    """A dense model unless active_b is given."""
    return Model(id=model_id, total_params_b=params_b, active_params_b=active_b or params_b, bytes_per_param=bpp,
                 layers=layers, kv_heads=kv_heads, head_dim=head_dim, max_context=max_context)


def pool(pool_id: str, *, chip_id: str = "chip", model_id: str = "m", replicas: int = 1, dpr: int = 1,
         concurrency: int = 1, max_queue: int = 1_000_000_000, cost: float = 1.0, mfu: float = 0.5,
         eff: float = 0.5) -> Pool:
    """A serving pool exactly as big as its replicas."""
    return Pool(id=pool_id, chip=chip_id, devices=replicas * dpr, devices_per_node=dpr,
                hourly_cost_per_device=cost, exporter="test", assign=Assignment(node_patterns=(f"{pool_id}-*",)),
                stack={}, serving=Serving(model=model_id, engine="vllm", replicas=replicas, devices_per_replica=dpr,
                                          max_concurrency=concurrency, max_queue=max_queue),
                cost_model=CostModel(mfu=mfu, mem_bw_eff=eff), onboarding=Onboarding("production"))


def fleet(*pools: Pool, chips: tuple[Chip, ...] | None = None, models: tuple[Model, ...] | None = None) -> Registry:
    """A registry of the given pools on the default chip and model unless others are given."""
    return Registry(name="test", chips=chips or (chip(),), models=models or (model(),), pools=pools)


def flat_model(model_id: str = "m", **kwargs: float) -> Model:
    """The default model with a KV cache of 4 B per token, so pass times do not grow measurably with context:
    10e9 x 2 B of weights read at 2e12 B/s make every memory-bound pass 0.01 s."""
    return model(model_id, layers=1, kv_heads=1, head_dim=1, **kwargs)  # type: ignore[arg-type]


def conversations(seed: int, sessions: int, turns: int, *, gap_s: float = 2.0, block: int = 512) -> pl.DataFrame:
    """Chat sessions whose every turn resends the session's conversation so far (its blocks) plus new text; turns of
    all sessions interleave in time."""
    rng = np.random.default_rng(seed)
    rows = []
    next_id = 0
    for s in range(sessions):
        ids: list[int] = []
        t = float(rng.uniform(0, gap_s * sessions / 4))
        for _ in range(turns):
            new = int(rng.integers(1, 6))
            ids = ids + list(range(next_id, next_id + new))
            next_id += new
            tokens = len(ids) * block - int(rng.integers(0, block))
            rows.append((int(t * 1000), tokens, int(rng.integers(20, 300)), list(ids), s))
            t += float(rng.exponential(gap_s))
    frame = pl.DataFrame(rows, schema={"arrival_ms": pl.Int64, "in_tokens": pl.Int64, "out_tokens": pl.Int64,
                                       "hash_ids": pl.List(pl.Int64), "session": pl.Int64}, orient="row")
    return frame.sort("arrival_ms").with_columns(pl.lit(block, pl.Int64).alias("block_tokens"),
                                                 (pl.col("arrival_ms") + 1_735_689_600_000).alias("arrival_ms"))
