"""The pools a replay runs on: registry pools with serving configs, after the candidate's overrides."""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any

from pool_registry import Chip, CostModel, EngineShape, Interconnect, Model, Registry
from pool_registry.model import GB
from replay.candidate import Candidate, PoolOverride
from replay.exceptions import ReplayError


@dataclass(frozen=True, kw_only=True)
class PoolSpec(EngineShape, CostModel):
    """Everything the cost model and the simulator need about one pool, with overrides applied: the shape of
    its replicas and its cost-model coefficients as the registry declares them, and the parts they stand on."""

    id: str
    chip: Chip
    model: Model
    hourly_cost_per_device: float
    devices_per_node: int = 0           # 0: one node holds a replica
    network: Interconnect | None = None

    @property
    def slots(self) -> int:
        """Sequences the pool can run at once: replicas x max_concurrency."""
        return self.replicas * self.max_concurrency

    @property
    def devices(self) -> int:
        """Devices the serving replicas occupy."""
        return self.replicas * self.devices_per_replica

    @property
    def peak_flops(self) -> float:
        """Dense peak FLOP/s of one device in the model's compute format (bf16's when the chip declares none)."""
        return self.chip.compute_peak(self.model.compute_format)[0] * 1e12

    @property
    def replica_flops(self) -> float:
        """Sustained FLOP/s of one replica: peak x MFU x devices."""
        return self.peak_flops * self.mfu * self.devices_per_replica

    @property
    def replica_attention_flops(self) -> float:
        """Sustained FLOP/s of one replica on attention over the context, which engines run in bf16 whatever the
        weights' format: bf16 peak x MFU x devices."""
        return self.chip.peak_tflops_bf16 * 1e12 * self.mfu * self.devices_per_replica

    @property
    def replica_decode_flops(self) -> float:
        """Sustained FLOP/s of one replica on decode tokens: peak x mfu_decode (else mfu) x devices."""
        return self.peak_flops * (self.mfu_decode or self.mfu) * self.devices_per_replica

    def link(self, across_nodes: bool) -> tuple[float, float]:
        """(B/s per device each way, seconds of latency per collective) of the link a collective group uses:
        the chip's interconnect, or the pool's node network for a group that spans nodes (when declared)."""
        link = self.network if across_nodes and self.network is not None else self.chip.interconnect
        bw = link.bw_gbps * 1e9
        if across_nodes and self.network is not None:
            bw = min(bw, self.chip.interconnect.bw_gbps * 1e9 or bw)
        lat = self.collective_us if self.collective_us is not None else link.latency_us
        return (bw if bw > 0 else math.inf), lat / 1e6

    @property
    def replica_bytes_per_s(self) -> float:
        """Sustained memory bandwidth of one replica in B/s: HBM bandwidth x efficiency x devices."""
        return self.chip.hbm_bw_tbps * 1e12 * self.mem_bw_eff * self.devices_per_replica

    @property
    def replica_memory_bytes(self) -> float:
        """HBM of one replica in bytes; spec sheets give capacity in GB = 1e9 bytes (H100: 80 GB)."""
        return self.chip.hbm_capacity_gb * GB * self.devices_per_replica

    @property
    def usable_memory_bytes(self) -> float:
        """The share of the replica's HBM the engine may take (vLLM's gpu_memory_utilization)."""
        return self.replica_memory_bytes * self.gpu_memory_utilization

    @property
    def kv_bytes_per_token(self) -> float:
        """KV bytes per token in the cache's dtype ('auto' keeps the model's), one copy (what a transfer moves)."""
        return self.model.kv_bytes_per_token_in(self.kv_cache_dtype)

    @property
    def kv_bytes_held_per_token(self) -> float:
        """KV bytes a replica holds and reads per token: every copy its TP group keeps (MLA: one per device)."""
        return self.kv_bytes_per_token * self.model.kv_copies(self.attention_tp)

    @property
    def kv_capacity_tokens(self) -> int:
        """Tokens the KV cache of one replica holds: (usable memory - weights, a vision encoder's too, and the
        copies data-parallel attention adds) / KV bytes per token, or 0."""
        free = self.usable_memory_bytes - self.model.resident_bytes - self.dense_copies_bytes
        return max(0, int(free // self.kv_bytes_held_per_token))

    @property
    def dense_copies_bytes(self) -> float:
        """Weight bytes data-parallel attention adds: every group beyond the first keeps its own copy of the
        dense part (attention, shared experts, embeddings: what every token reads)."""
        return self.model.dense_copies_bytes(self.attention_dp)

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
        replicas = o.replicas or (max(1, round(s.replicas * o.replicas_scale)) if o.replicas_scale else s.replicas)
        spec = PoolSpec(
            id=pool.id, chip=registry.chip_of(pool), model=registry.model(s.model),
            hourly_cost_per_device=o.hourly_cost_per_device or pool.hourly_cost_per_device,
            devices_per_node=pool.devices_per_node, network=pool.network,
            **_overridden(s, EngineShape, o), **_overridden(pool.cost_model, CostModel, o), replicas=replicas)
        _check(spec, candidate.name)
        specs.append(spec)
    if not specs:
        raise ReplayError(f"candidate '{candidate.name}' leaves no serving pool to replay on")
    return tuple(specs)


def _overridden(base: EngineShape | CostModel, shape: type, o: PoolOverride) -> dict[str, Any]:
    """The fields of shape in base, each replaced by the candidate's value where it sets one (not None)."""
    out = {}
    for f in fields(shape):
        if f.name != "replicas":  # replicas_scale applies to it: resolve_pools's own rule
            value = getattr(o, f.name)
            out[f.name] = getattr(base, f.name) if value is None else value
    return out


def pools_by_id(registry: Registry, candidate: Candidate) -> dict[str, PoolSpec]:
    """The candidate's pools by id (resolve_pools as a mapping)."""
    return {s.id: s for s in resolve_pools(registry, candidate)}


def _check(p: PoolSpec, candidate: str) -> None:
    """The serving rules the registry enforces, again after the candidate's overrides."""
    if p.devices_per_replica % p.pp:
        raise ReplayError(f"candidate '{candidate}': pool {p.id}: {p.devices_per_replica} devices per replica do "
                          f"not split into {p.pp} pipeline stages of equal width")
    if p.attention_dp > 1 and not p.model.experts:
        raise ReplayError(f"candidate '{candidate}': pool {p.id}: data-parallel attention splits a MoE model's dense "
                          f"part from its experts, but {p.model.id} declares no experts and experts_per_token")
    if p.attention_dp > 1 and (p.tp % p.attention_dp or p.ep < 2):
        raise ReplayError(f"candidate '{candidate}': pool {p.id}: {p.attention_dp} data-parallel attention groups "
                          f"need a TP degree they divide (TP{p.tp}) and expert-parallel experts (ep {p.ep})")
    if p.devices_per_replica % p.ep:
        raise ReplayError(f"candidate '{candidate}': pool {p.id}: {p.devices_per_replica} devices per replica do "
                          f"not split into {p.ep} expert-parallel groups of equal size")
    if p.max_num_batched_tokens < p.max_concurrency:
        raise ReplayError(f"candidate '{candidate}': pool {p.id}: max_num_batched_tokens "
                          f"{p.max_num_batched_tokens} is below max_concurrency {p.max_concurrency}")
