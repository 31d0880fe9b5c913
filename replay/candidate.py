"""What a candidate is, as plain frozen data: routing policy, per-pool what-if overrides, SLA tiers, overflow,
and the output-length predictor its router uses.

The YAML loader (replay.candidate_loader) builds these and checks them against the fleet and the policy registry;
everything else in the replay reads them from here, so config, loading and policies import no cycle.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

OVERFLOW_MODES = ("queue", "reject", "degrade")
FAULT_MODES = ("telemetry", "off")
INT_OVERRIDES = ("replicas", "max_concurrency", "devices_per_replica", "max_queue", "pp", "max_num_batched_tokens",
                 "ep", "attention_dp")
RATIO_OVERRIDES = ("mfu", "mem_bw_eff", "gpu_memory_utilization", "mfu_decode")
POSITIVE_OVERRIDES = ("hourly_cost_per_device", "replicas_scale")
NONNEGATIVE_OVERRIDES = ("step_overhead_ms", "seq_overhead_us", "chunk_overhead_us", "collective_us")
SHARE_OVERRIDES = ("serial_share",)  # 0 to 1, both ends included
OVERRIDE_FIELDS = (*INT_OVERRIDES, *RATIO_OVERRIDES, *POSITIVE_OVERRIDES, *NONNEGATIVE_OVERRIDES, *SHARE_OVERRIDES,
                   "kv_cache_dtype", "schedule", "async_scheduling", "enabled")


@dataclass(frozen=True)
class PoolOverride:
    """What a candidate changes about one pool; None keeps the registry's value.

    replicas_scale multiplies the registry's replica count (rounded, at least 1), so one candidate means the
    same what-if on the declared fleet and on a scaled-down copy of it; replicas, when given, wins.
    """

    replicas: int | None = None
    max_concurrency: int | None = None
    devices_per_replica: int | None = None
    max_queue: int | None = None
    pp: int | None = None
    max_num_batched_tokens: int | None = None
    mfu: float | None = None
    mem_bw_eff: float | None = None
    gpu_memory_utilization: float | None = None
    hourly_cost_per_device: float | None = None
    replicas_scale: float | None = None
    step_overhead_ms: float | None = None
    kv_cache_dtype: str | None = None
    enabled: bool = True
    ep: int | None = None
    attention_dp: int | None = None
    mfu_decode: float | None = None
    seq_overhead_us: float | None = None
    chunk_overhead_us: float | None = None
    collective_us: float | None = None
    schedule: str | None = None
    async_scheduling: bool | None = None
    serial_share: float | None = None
    # a calibration's standard error of each fitted coefficient, as a factor (replay.bands): bench and plan show
    # their predictions with the band it gives
    spread: dict[str, float] | None = None


@dataclass(frozen=True)
class SlaTier:
    """Latency limits of one SLA tier; None means no limit on that measure."""

    ttft_s: float | None = None
    e2e_s: float | None = None


@dataclass(frozen=True)
class PredictorSpec:
    """Which output-length predictor the router uses (replay.predictors), and its options as the candidate file
    gives them (only those it sets: each predictor fills in its own defaults)."""

    name: str = "online"
    options: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class PoolFaults:
    """How one pool fails and throttles: fatal failures per device-hour, the time a failed replica stays down,
    and the share of busy time its devices run below their reference clock, at what share of that clock."""

    failures_per_device_hour: float = 0.0
    repair_s: float | None = None          # None: the candidate's repair_s
    throttled_share: float = 0.0
    throttled_clock: float = 1.0


@dataclass(frozen=True)
class FaultSpec:
    """Where failures and throttling come from: the store's telemetry over `window_days` before the replayed
    traffic (`telemetry`), nowhere (`off`), and per-pool figures that replace the telemetry's."""

    mode: str = "telemetry"
    window_days: float = 7.0
    repair_s: float = 900.0
    pools: dict[str, PoolFaults] = field(default_factory=dict)


@dataclass(frozen=True)
class Candidate:
    """One routing and cost configuration to replay."""

    name: str
    policy: str = "sla_cost"
    policy_options: dict[str, tuple[str, ...]] = field(default_factory=dict)
    overflow: str = "queue"
    noise: float = 0.0
    drain_s: float | None = None
    sla_tiers: dict[str, SlaTier] = field(default_factory=dict)
    pools: dict[str, PoolOverride] = field(default_factory=dict)
    predictor: PredictorSpec = field(default_factory=PredictorSpec)
    faults: FaultSpec = field(default_factory=FaultSpec)
    # the calibration's error on each pool's step time as a factor (1.08: within /1.08 .. x1.08), as `hetpool
    # replay calibrate` writes it; the capacity runway widens its band by it, the replay itself ignores it
    step_time_spread: dict[str, float] = field(default_factory=dict)

    def override(self, pool_id: str) -> PoolOverride:
        """The override for a pool, or an empty one."""
        return self.pools.get(pool_id, PoolOverride())
