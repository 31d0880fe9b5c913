"""The physics behind the step model's coefficients, and money. replay/step.py does a pass's arithmetic.

One engine step (a pass: every running sequence advances by one token) of a replica takes

    pass_s    = max(memory_s, compute_s) + serial_share x min(memory_s, compute_s) + collective_s + engine_s
    memory_s  = pp x (weight bytes read + KV bytes the running sequences read / m) / (hbm_bw x mem_bw_eff x devices)
    compute_s = pp x (2 x active_params x (prefill tokens / mfu + decode tokens / mfu_decode)
                      + attention FLOPs x context products / mfu) / m / (peak_flops x devices)
    engine_s  = step_overhead + seq_overhead x running sequences + chunk_overhead x prompt chunks

(the sequences and tokens of the pass: under the prefill_first schedule a pass of prompts has no decoders)

The roofline's max(memory, compute) holds for one kernel that streams its operands while it computes. A pass
runs its layers' kernels one after another, each at its own bound (attention on the KV, the small-batch
matmuls on the weights, the large-batch ones on the FLOPs), so the pass takes more than the max of its sums
and at most their sum: serial_share (a cost-model coefficient, 0 to 1) is the share of the shorter of the two
that the longer does not hide. 0, the default, is the roofline as before the field existed. Its evidence is
how the time of a pass grows with the batch below the ridge point at two TP degrees (at one, compute that grows
with the batch and a time per running sequence look alike: docs/validation.md), or the compute-bound passes
where prompt chunks share a pass with decoders, which it lengthens by u x their memory time.

with m = min(pp, running sequences) micro-batches in flight: with pp pipeline stages a micro-batch goes through
the stages one tick each, a tick lasts as long as the slowest in-flight stage, and a sequence advances once
per full pass of pp ticks. Context products are what attention computes on: a decoding sequence's context,
and for a prompt chunk of c tokens after r computed ones c x (r + c / 2). Attention's FLOPs per context product
are GQA's 4 x heads x head dim per layer, or MLA's 2 x heads x (2 x kv_lora_rank + rope dims) with its
projections absorbed, over the layers that attend to the whole context (`full_attention_layers`), at the bf16
peak whatever the weights' format (pool_registry.Model.attention_flops). Without declared attention heads the
attention term is 0, as it was before the field existed. The KV a pass reads is what the replica holds:
MLA's latent once per device of the TP group (`Model.kv_copies`).

Weights. A dense model reads all its weights every step. A mixture-of-experts model with E routed experts of
which each token picks k reads its dense part (attention, shared experts, embeddings) and the experts its
tokens touch: a micro-batch of x tokens touches E x (1 - (1 - k / E)^x) experts, the k of one token when x = 1
and all of them for a large batch. The expert size follows from the parameter counts: p_e = (total - active) /
(E - k) and dense = active - k x p_e. A registry without the expert counts treats the parameters beyond the
active ones as experts picked with probability active / total, as before. With the counts, the routed experts'
GEMMs take their own roofline in each pass (replay/step.py): each touched expert sees x k / E of the tokens, so
its weights are read at bandwidth until x passes E / k times the ridge point (about 16 x 300 tokens for 8 of 128
on an H100), while attention and the dense part beside them already compute at the peak; the routed share of a
token's FLOPs is k x p_e / active (Model.routed_share).

Collectives, which no FLOP or byte of HBM hides (engines run them between the layers' kernels):
- tensor parallelism (tp = devices / pp) all-reduces the attention and the MLP output of every layer, a message
  of hidden x tokens x 2 B (activations in bf16) per micro-batch; a ring moves 2(tp - 1)/tp of it over each
  device's link in 2(tp - 1) steps, each paying a hop's latency. A MoE model's expert layers under expert
  parallelism (ep > 1) do not all-reduce: they send every token to its k experts and back (two all-to-alls per
  layer), each device sending k x hidden x 2 B x (ep - 1) / ep^2 per token of the micro-batch in ep - 1
  exchanges;
- pipeline stages send hidden x tokens x 2 B of activations to the next stage every tick (pp sends per pass),
  one hop each.
The link is the chip's interconnect within a node and the pool's node network for a group that spans nodes
(TP wider than a node, stages or expert groups across nodes); without a declared network the interconnect is
used. The latency of a hop is the cost model's collective_us, else the link's latency_us, else 0 (the step
counts are NCCL's ring and all-to-all); a calibration keeps a measured link family's typical figure instead of
that 0 (replay/hops.py), so the candidate it writes carries it. Without a declared hidden size (or attention
heads) the model has no collective term, as before the field existed.

    collective_s = layers x (n_tp x (2(tp - 1) x hop + 2(tp - 1)/tp x hidden x 2 B x tokens / m / bw)
                             + n_ep x ((ep - 1) x hop + k x hidden x 2 B x (ep - 1) / ep^2 x tokens / m / bw))
                   + [pp > 1] pp x (hop + hidden x 2 B x tokens / m / bw)

with n_tp = 2 all-reduces per layer (1 when the expert layers are expert-parallel) and n_ep = 2 all-to-alls per
layer when they are.

The seed design's formulas are the one-request limits: prefill 2 x tokens x active_params / (peak x mfu x
devices) when compute-bound, decode active_params x bytes_per_param / (hbm_bw x mem_bw_eff x devices) per token.

Money is busy device time: busy_s x devices_per_replica x hourly_cost_per_device / 3600, so twice the price
costs twice as much (the seed's `total / hourly_cost` ranked an expensive pool as cheaper; tests/test_costmodel.py
pins that down). A step's busy cost is shared by the tokens it computes. Provisioned cost keeps every replica
of a pool up for the whole window, busy or idle.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar

import numpy as np

from replay.fleet import PoolSpec

# the pass and the run sums live in replay/step.py (compiled with the replica); re-exported, as they are formulas too
from replay.step import StepModel as StepModel
from replay.step import fit_passes as fit_passes
from replay.step import passes_within as passes_within
from replay.step import run_seconds as run_seconds

A = TypeVar("A", float, np.ndarray)
ACT_BYTES = 2.0  # activations cross links in bf16 whatever the weights' number format


@dataclass(frozen=True)
class Collectives:
    """A pass's collective time: fixed seconds, plus seconds per token of a micro-batch."""

    fixed_s: float
    s_per_token: float

    @classmethod
    def of(cls, pool: PoolSpec) -> Collectives:
        """The collectives of one replica of a pool, from its model's shape, its layout and its links."""
        # data-parallel attention: each group all-reduces its own share of the tokens over its own devices
        m, tp, pp, ep, groups = pool.model, pool.attention_tp, pool.pp, pool.ep, pool.attention_dp
        hidden = m.hidden
        if hidden <= 0:
            return cls(0.0, 0.0)
        per_node = pool.devices_per_node or pool.devices_per_replica
        fixed = per_token = 0.0
        msg = hidden * ACT_BYTES
        expert_parallel = ep > 1 and m.moe
        if tp > 1:  # a ring all-reduce: 2(tp - 1) steps, each a hop's latency
            bw, lat = pool.link(tp > per_node)
            n = 1 if expert_parallel else 2
            fixed += m.layers * n * 2 * (tp - 1) * lat
            per_token += m.layers * n * 2.0 * (tp - 1) / tp * msg / bw / groups
        if expert_parallel:  # an all-to-all: ep - 1 exchanges with the others
            bw, lat = pool.link(ep > per_node)
            k = m.experts_per_token or max(1.0, ep * m.active_params_b / m.total_params_b)
            fixed += m.layers * 2 * (ep - 1) * lat
            per_token += m.layers * 2 * k * msg * (ep - 1) / ep**2 / bw
        if pp > 1:
            bw, lat = pool.link(pool.devices_per_replica > per_node)
            fixed += pp * lat
            per_token += pp * msg / bw
        return cls(fixed, per_token)


def step_model(pool: PoolSpec, speed: float = 1.0) -> StepModel:
    """The step model of a pool's replicas, slowed by `speed` (> 1 slower) for replica-to-replica spread."""
    m = pool.model
    flops = 2.0 * m.active_params_b * 1e9
    if m.expert_params_b:
        # data-parallel attention groups each read their own copy of the dense part; the experts are read once
        dense = m.dense_weight_bytes * pool.attention_dp
        pick = m.experts_per_token / m.experts
    else:
        dense, pick = 0.0, min(1.0, m.active_params_b / m.total_params_b)
    comm = Collectives.of(pool)
    return StepModel(pp=pool.pp, s_per_byte=speed / pool.replica_bytes_per_s,
                     s_per_token=speed * flops / pool.replica_flops,
                     kv_bytes=pool.kv_bytes_held_per_token, weight_bytes=m.weight_bytes + pool.dense_copies_bytes,
                     pick=pick,
                     overhead_s=speed * pool.step_overhead_ms / 1000.0,
                     s_per_token_decode=speed * flops / pool.replica_decode_flops, dense_bytes=dense,
                     seq_overhead_s=speed * pool.seq_overhead_us / 1e6,
                     chunk_overhead_s=speed * pool.chunk_overhead_us / 1e6,
                     s_per_ctx=speed * m.attention_flops / pool.replica_attention_flops,
                     comm_s=speed * comm.fixed_s, comm_s_per_token=speed * comm.s_per_token,
                     serial_share=pool.serial_share,
                     whole=pool.max_num_batched_tokens + pool.max_concurrency,
                     routed=m.routed_share)


def prefill_seconds(in_tokens: A, cached_tokens: A, pool: PoolSpec) -> A:
    """One-request limit of prefill: the uncached prompt at the replica's sustained FLOP/s, with attention over the
    context its tokens see (the cached prefix, then half the uncached part on average) when the model declares it."""
    step = step_model(pool)
    return _prefill(in_tokens, cached_tokens, step.s_per_token, step.s_per_ctx)


def _prefill(in_tokens: A, cached_tokens: A, s_per_token: A | float, s_per_ctx: A | float) -> A:
    return (in_tokens - cached_tokens) * (s_per_token + s_per_ctx * (in_tokens + cached_tokens) / 2.0)


def reuse_seconds(in_tokens: A, cached_tokens: A, s_per_token: A | float, s_per_ctx: A | float) -> A:
    """Prefill compute a cached prefix skips: the prefill of the whole prompt less that of its uncached part."""
    return _prefill(in_tokens, in_tokens * 0, s_per_token, s_per_ctx) - _prefill(in_tokens, cached_tokens,
                                                                               s_per_token, s_per_ctx)


def decode_seconds(out_tokens: A, pool: PoolSpec) -> A:
    """One-request limit of decode: every token reads the weights one token touches (the active ones)."""
    step = step_model(pool)
    return out_tokens * step.weight_bytes_read(1.0) * step.s_per_byte


def busy_cost(busy_seconds: A, pool: PoolSpec) -> A:
    """Money for busy time of one replica: seconds x devices x hourly cost per device / 3600."""
    return busy_seconds * pool.replica_cost_per_s


def provisioned_cost(pool: PoolSpec, seconds: float) -> float:
    """Money for keeping all of a pool's serving replicas up for a window, busy or idle."""
    return pool.replicas * pool.replica_cost_per_s * seconds


def link_bytes_per_s(src: PoolSpec, dst: PoolSpec) -> float:
    """What a transfer between two pools runs at: the slower side's interconnect."""
    return min(src.interconnect_bytes_per_s, dst.interconnect_bytes_per_s)


def kv_transfer_seconds(tokens: A, src: PoolSpec, dst: PoolSpec) -> A:
    """Time to move a request's KV cache between pools over the slower side's interconnect."""
    return tokens * src.kv_bytes_per_token / link_bytes_per_s(src, dst)


EMBEDDING_BYTES = 2  # an image token's embedding crosses in BF16, one value per hidden dimension


def embedding_transfer_seconds(tokens: A, src: PoolSpec, dst: PoolSpec) -> A:
    """Time to move a request's image embeddings from an encode pool to a prefill pool: its image tokens x the
    language model's hidden size x 2 B over the slower side's interconnect."""
    return tokens * dst.model.hidden * EMBEDDING_BYTES / link_bytes_per_s(src, dst)


def full_batch_cost(in_tokens: np.ndarray, cached_tokens: np.ndarray, out_tokens: np.ndarray,
                    pool: PoolSpec) -> np.ndarray:
    """What a request costs on a pool running full batches: its share of the steps it takes part in.

    Prefill tokens pay the compute of a token; each output token pays 1/max_concurrency of a pass of
    max_concurrency sequences of about this request's context. Policies rank pools by it.
    """
    return full_batch_costs(in_tokens, cached_tokens, out_tokens, (pool,))[0]


def full_batch_costs(in_tokens: np.ndarray, cached_tokens: np.ndarray, out_tokens: np.ndarray,
                     pools: tuple[PoolSpec, ...]) -> np.ndarray:
    """full_batch_cost on every pool at once: (pools, requests)."""
    return FullBatch(pools).costs(in_tokens, cached_tokens, out_tokens)


class FullBatch:
    """The coefficients of full_batch_cost for several pools, each a column, so that one pass of array operations
    prices every pool: the plan ranks each block of a learning predictor's arrivals anew with it."""

    def __init__(self, pools: tuple[PoolSpec, ...]) -> None:
        steps = [step_model(p) for p in pools]
        full = [p.max_concurrency for p in pools]
        # a pass of a full batch of decoders as a line in their mean context x: max(a + b x, c + d x) + o
        lines = [s.line(f, f, f, 0.0, 0.0, float(f), float(f)) for s, f in zip(steps, full, strict=True)]

        def col(values: list[float] | list[int]) -> np.ndarray:
            return np.array(values, dtype=np.float64)[:, None]

        self.a, self.b, self.c, self.d, self.o = (col([ln[k] for ln in lines]) for k in range(5))
        self.spt, self.sctx = col([s.s_per_token for s in steps]), col([s.s_per_ctx for s in steps])
        self.rate = col([p.replica_cost_per_s for p in pools])
        self.full = col(full)

    def costs(self, in_tokens: np.ndarray, cached_tokens: np.ndarray, out_tokens: np.ndarray) -> np.ndarray:
        """(pools, requests): what each request costs on each pool."""
        context = in_tokens + out_tokens / 2.0
        per_token = (np.maximum(self.a + self.b * context, self.c + self.d * context) + self.o) / self.full
        prefill = _prefill(in_tokens, cached_tokens, self.spt, self.sctx)
        return (prefill + out_tokens * per_token) * self.rate
