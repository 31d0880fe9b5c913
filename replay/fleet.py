"""The pools a replay runs on: registry pools with serving configs, after the candidate's overrides."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from pool_registry import Chip, Model, Registry
from pool_registry.model import GB
from replay.errors import ReplayError

if TYPE_CHECKING:
    from replay.candidate import Candidate


@dataclass(frozen=True)
class PoolSpec:
    """Everything the cost model and the simulator need about one pool, with overrides applied."""

    id: str
    chip: Chip
    model: Model
    replicas: int
    devices_per_replica: int
    max_concurrency: int
    max_queue: int
    mfu: float
    mem_bw_eff: float
    hourly_cost_per_device: float

    @property
    def slots(self) -> int:
        """Requests the pool can serve at once: replicas x max_concurrency."""
        return self.replicas * self.max_concurrency

    @property
    def devices(self) -> int:
        """Devices the serving replicas occupy."""
        return self.replicas * self.devices_per_replica

    @property
    def replica_flops(self) -> float:
        """Sustained FLOP/s of one replica: peak x MFU x devices."""
        return self.chip.peak_tflops_bf16 * 1e12 * self.mfu * self.devices_per_replica

    @property
    def replica_bytes_per_s(self) -> float:
        """Sustained memory bandwidth of one replica in B/s: HBM bandwidth x efficiency x devices."""
        return self.chip.hbm_bw_tbps * 1e12 * self.mem_bw_eff * self.devices_per_replica

    @property
    def replica_memory_bytes(self) -> float:
        """HBM of one replica in bytes; spec sheets give capacity in GB = 1e9 bytes (H100: 80 GB)."""
        return self.chip.hbm_capacity_gb * GB * self.devices_per_replica

    @property
    def replica_cost_per_s(self) -> float:
        """Money per second of one busy replica."""
        return self.devices_per_replica * self.hourly_cost_per_device / 3600.0

    @property
    def interconnect_bytes_per_s(self) -> float:
        """Per-direction interconnect bandwidth of one replica in B/s (devices send their KV shards at once)."""
        return self.chip.interconnect.bw_gbps * 1e9 * self.devices_per_replica


def resolve_pools(registry: Registry, candidate: Candidate) -> tuple[PoolSpec, ...]:
    """The enabled serving pools in registry order, with the candidate's overrides applied."""
    specs = []
    for pool in registry.pools:
        if pool.serving is None:
            continue
        o = candidate.override(pool.id)
        if not o.enabled:
            continue
        s = pool.serving
        specs.append(PoolSpec(
            id=pool.id, chip=registry.chip_of(pool), model=registry.model(s.model),
            replicas=o.replicas or s.replicas,
            devices_per_replica=o.devices_per_replica or s.devices_per_replica,
            max_concurrency=o.max_concurrency or s.max_concurrency,
            max_queue=s.max_queue if o.max_queue is None else o.max_queue,
            mfu=o.mfu or pool.cost_model.mfu, mem_bw_eff=o.mem_bw_eff or pool.cost_model.mem_bw_eff,
            hourly_cost_per_device=o.hourly_cost_per_device or pool.hourly_cost_per_device,
        ))
    if not specs:
        raise ReplayError(f"candidate '{candidate.name}' leaves no serving pool to replay on")
    return tuple(specs)
