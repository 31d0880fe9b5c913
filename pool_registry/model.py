"""Frozen domain objects of the fleet: chips, models, pools and the registry that ties them."""

from __future__ import annotations

import datetime as dt
import fnmatch
import math
from dataclasses import dataclass, field
from functools import cached_property
from typing import TypeVar

from pool_registry.onboarding import Check
from pool_registry.vision import Vision

DTYPES = ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "fp6", "fp4", "int8", "int4")
# vLLM's --kv-cache-dtype values; "auto" stores the cache in the model's own kv_bytes_per_elem.
# How an engine fills a step: decode_first (vLLM) runs every decoder and fills the rest of the token budget with
# prompt chunks; prefill_first (SGLang) runs a step of prompts alone whenever one waits, and decodes otherwise.
SCHEDULES = ("decode_first", "prefill_first")
# The number formats a chip declares a peak for (peak_tflops), and the one a model computes in when its weights'
# format has no peak of its own: fp16 runs at bf16's rate on every chip we know, and weight-only formats (int4,
# fp6) are widened to bf16 before their matmuls.
PEAK_FORMATS = ("bf16", "fp8", "fp4", "int8")
COMPUTE_OF = {"bf16": "bf16", "fp16": "bf16", "fp8": "fp8", "fp4": "fp4", "int8": "int8"}
KV_CACHE_DTYPES = {"auto": None, "bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "fp8_e4m3": 1.0, "fp8_e5m2": 1.0}

# Onboarding stages in order; a chip reaches production only after every earlier stage has evidence.
ONBOARDING_STAGES = (
    "hardware",     # devices racked, visible to the OS, device count matches the order
    "driver",       # driver and firmware installed at the declared versions
    "exporter",     # the exporter's metrics arrive in hetpool and normalize without rejects
    "framework",    # the serving engine starts and serves the model
    "accuracy",     # model accuracy matches the reference within tolerance
    "performance",  # throughput and latency baseline measured; cost model calibrated
    "canary",       # a share of real traffic served within SLA
    "production",   # routed by the production policy
)

GIB = 1024**3
GB = 1e9


@dataclass(frozen=True)
class Interconnect:
    """The device-to-device link of a chip (NVLink, Infinity Fabric, HCCS, RoCE, ...)."""

    kind: str
    bw_gbps: float  # GB/s per device, one direction
    latency_us: float = 0.0  # time of one collective beyond its bytes (launch, sync); 0 when not declared


@dataclass(frozen=True)
class Thermal:
    """A chip's temperature limits in °C: where it starts to slow down, and where it is in danger."""

    warning_c: float
    critical_c: float


@dataclass(frozen=True)
class Chip:
    """Capability descriptor of one accelerator model."""

    id: str
    vendor: str
    name: str
    peak_tflops_bf16: float
    hbm_capacity_gb: float
    hbm_bw_tbps: float
    interconnect: Interconnect
    supported_dtypes: tuple[str, ...]
    thermal: Thermal | None = None  # None: the status rules' default limits apply
    peak_tflops: dict[str, float] = field(default_factory=dict)  # PEAK_FORMATS -> dense TFLOPS; bf16 as above

    def peak(self, fmt: str) -> float | None:
        """Dense peak TFLOPS in a number format (PEAK_FORMATS), or None when the chip declares none for it."""
        return self.peak_tflops_bf16 if fmt == "bf16" else self.peak_tflops.get(fmt)

    def compute_peak(self, fmt: str) -> tuple[float, bool]:
        """(dense peak TFLOPS a model computing in `fmt` runs at, True when that is bf16's for want of fmt's)."""
        own = self.peak(fmt)
        return (self.peak_tflops_bf16, True) if own is None else (own, False)


@dataclass(frozen=True)
class Model:
    """A served model's size and shape, enough to size weights and KV cache."""

    id: str
    total_params_b: float
    active_params_b: float
    bytes_per_param: float
    layers: int
    kv_heads: int
    head_dim: int
    max_context: int
    kv_bytes_per_elem: float = 2.0
    requires: dict[str, str] = field(default_factory=dict)  # stack component -> PEP 440 specifier
    dtype: str | None = None  # the weights' number format; None when not declared (not checked against chips)
    hidden_size: int = 0          # residual width; 0 when not declared (derived from attention heads if given)
    attention_heads: int = 0      # query heads; 0 when not declared
    experts: int = 0              # routed experts per MoE layer; 0 for a dense model or when not declared
    experts_per_token: int = 0    # routed experts each token picks
    vision: Vision | None = None  # a vision-language model's image encoder (pool_registry/vision.py)
    compute_dtype: str | None = None  # PEAK_FORMATS: the matmuls' format; None: the weights' (COMPUTE_OF)
    kv_lora_rank: int = 0         # MLA: the latent KV's width per token and layer; 0 for GQA/MHA
    qk_rope_head_dim: int = 0     # MLA: the rotary key dims kept beside the latent
    full_attention_layers: int = 0  # layers whose KV grows with the context; 0: all (sliding/linear keep none)

    @property
    def compute_format(self) -> str:
        """The number format the model's matmuls run in: declared, else its weights' where a chip has a peak for
        it, else bf16."""
        return self.compute_dtype or COMPUTE_OF.get(self.dtype or "bf16", "bf16")

    @property
    def hidden(self) -> int:
        """Residual width: declared, else attention heads x head dim, else estimated (hidden_estimated)."""
        return self.hidden_size or self.attention_heads * self.head_dim or self.estimated_hidden

    @property
    def hidden_estimated(self) -> bool:
        """True when the residual width is not declared (neither hidden_size nor attention_heads) but estimated."""
        return not (self.hidden_size or self.attention_heads)

    @property
    def estimated_hidden(self) -> int:
        """Residual width from the parameter counts: a transformer layer holds about 12 hidden^2 parameters (4 in
        attention's four projections, 8 in an MLP four times as wide, or SwiGLU's three at 8/3), so hidden is
        about sqrt(active params / (12 x layers)); the active ones, as a MoE layer runs k experts' MLPs."""
        return round(math.sqrt(self.active_params_b * 1e9 / (12 * self.layers))) if self.layers > 0 else 0

    @property
    def moe(self) -> bool:
        """True when the model has more parameters than each token uses."""
        return self.active_params_b < self.total_params_b

    @property
    def weight_bytes(self) -> float:
        """Bytes of weights: every parameter is resident even when only some are active."""
        return self.total_params_b * 1e9 * self.bytes_per_param

    @property
    def resident_bytes(self) -> float:
        """Bytes of weights held in memory: the language model's and its vision encoder's."""
        return self.weight_bytes + (self.vision.weight_bytes(self.bytes_per_param) if self.vision else 0.0)

    @property
    def dense_weight_bytes(self) -> float:
        """Bytes of the weights every token reads: all of a dense model's; of a MoE model with expert counts, its
        active parameters less the k routed experts a token picks (attention, shared experts, embeddings), each
        routed expert being (total - active) / (E - k) parameters."""
        if not self.expert_params_b:
            return self.weight_bytes
        dense_b = self.active_params_b - self.experts_per_token * self.expert_params_b
        return max(0.0, dense_b) * 1e9 * self.bytes_per_param

    @property
    def expert_params_b(self) -> float:
        """Billions of parameters in one routed expert (over all its layers), (total - active) / (E - k); 0 for a
        dense model or a MoE model without expert counts."""
        if not (self.moe and self.experts and self.experts_per_token):
            return 0.0
        return (self.total_params_b - self.active_params_b) / (self.experts - self.experts_per_token)

    @property
    def routed_share(self) -> float:
        """Share of a token's matmul FLOPs in the k routed experts it picks, k x expert / active parameters (0
        without expert counts)."""
        if not self.expert_params_b:
            return 0.0
        return min(1.0, self.experts_per_token * self.expert_params_b / self.active_params_b)

    def dense_copies_bytes(self, attention_dp: int) -> float:
        """Weight bytes data-parallel attention adds to a replica: every group beyond the first keeps its own copy
        of the dense part (what every token reads)."""
        return self.dense_weight_bytes * (attention_dp - 1) if attention_dp > 1 else 0.0

    @property
    def mla(self) -> bool:
        """True for multi-head latent attention (DeepSeek-V2/V3): one latent KV vector per token and layer."""
        return self.kv_lora_rank > 0

    @property
    def kv_layers(self) -> int:
        """Layers that keep a KV growing with the context: declared full-attention layers, else all of them."""
        return self.full_attention_layers or self.layers

    @property
    def kv_bytes_per_token(self) -> float:
        """KV cache bytes per token, one copy: per layer that keeps a growing KV, MLA's latent (kv_lora_rank +
        qk_rope_head_dim), else K and V of every KV head."""
        per_layer = self.kv_lora_rank + self.qk_rope_head_dim if self.mla else 2 * self.kv_heads * self.head_dim
        return float(per_layer * self.kv_layers * self.kv_bytes_per_elem)

    def kv_bytes_per_token_in(self, kv_cache_dtype: str) -> float:
        """kv_bytes_per_token with the cache in an engine's --kv-cache-dtype ('auto' keeps the model's)."""
        per_elem = KV_CACHE_DTYPES.get(kv_cache_dtype) or self.kv_bytes_per_elem
        return self.kv_bytes_per_token / self.kv_bytes_per_elem * per_elem

    def kv_copies(self, tp: int) -> float:
        """Copies of each token's KV a tensor-parallel group of `tp` holds: MLA's latent is one vector every head
        reads, so each device keeps it whole (tp copies); GQA's KV heads split over the group, and past one head a
        device each is replicated (vLLM and SGLang give every device at least one: tp / kv_heads copies)."""
        if self.mla:
            return float(tp)
        return max(1.0, tp / self.kv_heads) if self.kv_heads else 1.0

    @property
    def attention_flops(self) -> float:
        """Attention's FLOPs per token and context token it attends to, over the layers that attend to the whole
        context: GQA 4 x heads x head dim a layer (QK^T and AV), MLA with its projections absorbed (as engines
        decode) 2 x heads x (kv_lora_rank + rope dims) for the scores and 2 x heads x kv_lora_rank for the values."""
        if self.mla:
            return 2.0 * self.kv_layers * self.attention_heads * (2 * self.kv_lora_rank + self.qk_rope_head_dim)
        return 4.0 * self.kv_layers * self.attention_heads * self.head_dim


@dataclass(frozen=True)
class Assignment:
    """How a sample finds its pool: a node-name glob, or labels that must all match."""

    node_patterns: tuple[str, ...] = ()
    labels: dict[str, str] = field(default_factory=dict)

    def matches(self, node: str, labels: dict[str, str] | None = None) -> bool:
        """True when the node name or the sample labels satisfy this rule."""
        if self.node_patterns and any(fnmatch.fnmatchcase(node, p) for p in self.node_patterns):
            return True
        if self.labels:
            have = labels or {}
            return all(have.get(k) == v for k, v in self.labels.items())
        return False


@dataclass(frozen=True, kw_only=True)
class EngineShape:
    """How wide a pool's replicas are and how their engine batches (vLLM's names and defaults).

    max_concurrency is the engine's max_num_seqs (running sequences per replica); max_queue bounds the
    requests waiting in the whole pool. pp is the pipeline depth, so tensor parallelism is
    devices_per_replica / pp. step_overhead_ms is the fixed time every engine step adds (scheduling,
    sampling, launches) and seq_overhead_us the time it adds per running sequence; 0 keeps a registry written
    before they existed meaning what it meant. The registry's serving block and the replay's pools share it.
    """

    replicas: int
    devices_per_replica: int
    max_concurrency: int
    max_queue: int = 1024
    pp: int = 1
    max_num_batched_tokens: int = 8192
    gpu_memory_utilization: float = 0.9
    kv_cache_dtype: str = "auto"
    step_overhead_ms: float = 0.0
    seq_overhead_us: float = 0.0  # engine time per running sequence per step (scheduling, sampling, detokenizing)
    chunk_overhead_us: float = 0.0  # engine time per prompt chunk in a step (admitting, preparing a prefill's inputs)
    ep: int = 1                   # expert-parallel degree of a MoE model's expert layers within the replica
    # data-parallel attention groups within the replica (SGLang's --enable-dp-attention --dp-size, vLLM's
    # --data-parallel-size with --enable-expert-parallel): each group runs attention for its own sequences on
    # tp / attention_dp devices, with its own copy of the dense weights, while the experts stay expert-parallel
    attention_dp: int = 1
    schedule: str = "decode_first"  # SCHEDULES: what a step runs when prompts wait
    # the scheduler composes each pass while the one before it runs (vLLM's --async-scheduling, SGLang's overlap
    # scheduler unless --disable-overlap-schedule), so a request arriving during a pass joins the one after next
    async_scheduling: bool = False

    @property
    def tp(self) -> int:
        """Tensor-parallel degree: devices per pipeline stage."""
        return max(1, self.devices_per_replica // self.pp)

    @property
    def attention_tp(self) -> int:
        """Devices one attention group spans: the stage's TP over its data-parallel attention groups."""
        return max(1, self.tp // max(1, self.attention_dp))


@dataclass(frozen=True, kw_only=True)
class Serving(EngineShape):
    """What a pool serves (a model id of the registry, on an engine) and the shape of its replicas."""

    model: str
    engine: str


@dataclass(frozen=True)
class CostModel:
    """Efficiency coefficients of the roofline cost model."""

    mfu: float
    mem_bw_eff: float
    mfu_decode: float | None = None    # share of peak FLOP/s decode tokens sustain; None: as prefill (mfu)
    collective_us: float | None = None  # latency of one collective; None: the link's declared latency_us
    # share of the shorter of a pass's memory and compute time not hidden under the longer: 0 is the roofline's
    # max(memory, compute), 1 their sum (a pass's kernels run one after another, each with its own bound)
    serial_share: float = 0.0


@dataclass(frozen=True)
class Onboarding:
    """Where a pool's chip stands on the road to production, with dated evidence per stage."""

    stage: str
    started: dt.date | None = None
    evidence: dict[str, str] = field(default_factory=dict)
    checks: dict[str, Check] = field(default_factory=dict)  # checklist item -> sign-off or evidence files

    @property
    def stage_index(self) -> int:
        """Position of the current stage in ONBOARDING_STAGES."""
        return ONBOARDING_STAGES.index(self.stage)


@dataclass(frozen=True)
class Pool:
    """A set of identical devices with a price, an exporter, a stack and a serving config."""

    id: str
    chip: str
    devices: int
    devices_per_node: int
    hourly_cost_per_device: float
    exporter: str
    assign: Assignment
    stack: dict[str, str]
    serving: Serving | None
    cost_model: CostModel
    onboarding: Onboarding
    network: Interconnect | None = None  # the node-to-node network per device, for replicas spanning nodes

    @property
    def nodes(self) -> int:
        """Number of nodes, rounding a partial node up."""
        return -(-self.devices // self.devices_per_node)

    @property
    def hourly_cost(self) -> float:
        """Cost of the whole pool per hour."""
        return self.devices * self.hourly_cost_per_device


@dataclass(frozen=True)
class Registry:
    """The whole fleet, with references already checked."""

    name: str
    chips: tuple[Chip, ...]
    models: tuple[Model, ...]
    pools: tuple[Pool, ...]

    def chip(self, chip_id: str) -> Chip:
        """The chip with this id."""
        return _by_id(self.chips, chip_id, "chip")

    def model(self, model_id: str) -> Model:
        """The model with this id."""
        return _by_id(self.models, model_id, "model")

    def pool(self, pool_id: str) -> Pool:
        """The pool with this id."""
        found = self._pool_index.get(pool_id)
        return found if found is not None else _by_id(self.pools, pool_id, "pool")

    @cached_property
    def _pool_index(self) -> dict[str, Pool]:
        # a lookup per pool over 10,000 pools would otherwise scan the tuple each time; the first of an id wins,
        # as in the scan (a validated registry has no repeats)
        index: dict[str, Pool] = {}
        for p in reversed(self.pools):
            index[p.id] = p
        return index

    def chip_of(self, pool: Pool) -> Chip:
        """The chip a pool is built from."""
        return self.chip(pool.chip)


class UnknownIdError(LookupError):
    """A lookup by id that names nothing in the registry."""

    def __str__(self) -> str:
        return str(self.args[0])


_Item = TypeVar("_Item", Chip, Model, Pool)


def _by_id(items: tuple[_Item, ...], wanted: str, kind: str) -> _Item:
    for item in items:
        if item.id == wanted:
            return item
    known = ", ".join(i.id for i in items)
    raise UnknownIdError(f"unknown {kind} '{wanted}'; known: {known}")
