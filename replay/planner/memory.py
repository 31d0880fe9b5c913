"""What one device of a layout holds: its shard of the weights, its share of the KV cache, the engine's working
memory, all under gpu_memory_utilization; and the memory wall, the fewest devices that could hold it all.

Per device of a layout with tp x pp devices (GB are 1e9 bytes, as chips' spec sheets count them):

    weights  = total_params x bytes_per_param / (tp x pp)        every parameter is resident, even a MoE's idle experts
    encoder  = a vision encoder's weight bytes / tp               on the first stage, split as the decoder's layers
    kv       = tokens x 2 x (layers / pp) x max(1, kv_heads / tp) x head_dim x kv bytes per element
               (tokens = context x concurrent sequences; a KV head is replicated when tp exceeds the KV heads;
               layers are those with a growing KV; MLA: tokens x (layers / pp) x (kv_lora_rank + rope dims) x
               bytes, its latent whole on every device)
    working  = RUNTIME_GB + max_num_batched_tokens x hidden x 2 B x (RESIDUAL_WIDTHS + MLP_WIDTHS / tp)
    usable   = hbm_capacity x gpu_memory_utilization

The working memory is the engine's runtime (context, CUDA graphs, communication buffers: vLLM's non-torch memory
is of that order) plus the activations of the largest step it profiles: the residual stream and its norm whole on
every device, and the MLP's gate and up projections (2 x 3.5 hidden, Llama's ratio) split by tp. A model without
a declared hidden size uses the estimated one (pool_registry.Model.estimated_hidden).

Every sum counts the first stage's device, the fullest one when a vision encoder sits there. The memory wall is
ceil((weights + encoder + kv) / (usable - working)) devices, with the whole model's weights and KV and the working
memory of a node-wide tensor-parallel group: no layout of fewer devices can fit, and a layout of that many still has to
honour the divisibility rules.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from pool_registry import Chip, Model
from pool_registry.model import GB
from replay.costmodel import ACT_BYTES
from replay.planner.layouts import Layout

RUNTIME_GB = 1.0
RESIDUAL_WIDTHS = 2.0   # residual stream and its normalized copy, on every device
MLP_WIDTHS = 7.0        # gate and up projections at 3.5 x hidden each, split by tp


@dataclass(frozen=True)
class Engine:
    """The engine settings memory depends on (vLLM's names)."""

    gpu_memory_utilization: float = 0.9
    kv_cache_dtype: str = "auto"
    max_num_batched_tokens: int = 8192


@dataclass(frozen=True)
class Memory:
    """One device's memory under a layout, in GB, and the KV tokens the replica has room for."""

    usable_gb: float
    weights_gb: float            # the decoder's and a vision encoder's
    kv_gb: float
    working_gb: float
    kv_tokens_per_replica: int   # tokens of KV cache the replica holds beside weights and working memory
    encoder_gb: float = 0.0      # of weights_gb, the vision encoder's (0 for a text-only model)

    @property
    def used_gb(self) -> float:
        """Weights, KV cache and working memory together."""
        return self.weights_gb + self.kv_gb + self.working_gb

    @property
    def fits(self) -> bool:
        """True when it all fits the usable memory."""
        return self.used_gb <= self.usable_gb

    @property
    def shortfall_gb(self) -> float:
        """GB per device beyond the usable memory (0 when it fits)."""
        return max(0.0, self.used_gb - self.usable_gb)


def kv_bytes_per_token_per_device(model: Model, engine: Engine, tp: int, pp: int) -> float:
    """One device's KV bytes per token: its stage's layers, and its share of the copies its TP group keeps
    (Model.kv_copies: KV heads split, at least one a device; MLA's whole latent)."""
    return model.kv_bytes_per_token_in(engine.kv_cache_dtype) * model.kv_copies(tp) / tp / pp


def working_bytes(model: Model, engine: Engine, tp: int) -> float:
    """The engine's runtime plus the activations of its largest step, on one device."""
    act = engine.max_num_batched_tokens * model.hidden * ACT_BYTES * (RESIDUAL_WIDTHS + MLP_WIDTHS / tp)
    return RUNTIME_GB * GB + act


def memory(layout: Layout, model: Model, chip: Chip, engine: Engine, tokens: int) -> Memory:
    """Per-device memory of a layout whose replica holds `tokens` tokens of KV cache."""
    tp, pp, dp = layout.tp, layout.pp, layout.attention_dp
    usable = chip.hbm_capacity_gb * GB * engine.gpu_memory_utilization
    encoder = (model.resident_bytes - model.weight_bytes) / tp
    # data-parallel attention: each group of tp / dp devices keeps its own copy of the dense weights, and each device
    # the KV of its group's sequences only (a replica's token lives on one group: 1 / dp of them on each device)
    dense_copies = model.dense_copies_bytes(dp) / (tp * pp)
    weights = model.weight_bytes / (tp * pp) + dense_copies + encoder
    per_token = kv_bytes_per_token_per_device(model, engine, tp // dp, pp) / dp
    work = working_bytes(model, engine, tp)
    room = usable - weights - work
    return Memory(usable_gb=usable / GB, weights_gb=weights / GB, kv_gb=tokens * per_token / GB,
                  working_gb=work / GB, kv_tokens_per_replica=max(0, int(room // per_token)), encoder_gb=encoder / GB)


def memory_wall(model: Model, chip: Chip, engine: Engine, tokens: int, devices_per_node: int) -> int | None:
    """The fewest devices whose memory holds the weights and `tokens` of KV, or None when a device cannot even
    hold its working memory."""
    room = chip.hbm_capacity_gb * GB * engine.gpu_memory_utilization - working_bytes(model, engine, devices_per_node)
    if room <= 0:
        return None
    need = model.resident_bytes + tokens * model.kv_bytes_per_token_in(engine.kv_cache_dtype)
    return max(1, math.ceil(need / room))
