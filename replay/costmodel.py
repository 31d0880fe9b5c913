"""The roofline cost model of a continuously batching replica, and money. Every formula of the replay is here.

One engine step (a pass: every running sequence advances by one token) of a replica takes

    pass_s  = pp x max(memory_s, compute_s) + step_overhead
    memory_s  = (weight bytes read + KV bytes of the running sequences / m) / (hbm_bw x mem_bw_eff x devices)
    compute_s = 2 x active_params x step tokens / m / (peak_flops x mfu x devices)

with m = min(pp, running sequences) micro-batches in flight: with pp pipeline stages a micro-batch goes through
the stages one tick each, a tick lasts as long as the slowest in-flight stage, and a sequence advances once
per full pass of pp ticks. A dense model reads all its weights every step. A mixture-of-experts model reads the
experts its tokens touch: treating the parameters beyond the active ones as experts picked independently per
token with probability active/total, a micro-batch of x tokens reads total x (1 - (1 - active/total)^x) bytes'
worth of weights: the active weights for one token, all of them for a large batch.

The seed design's formulas are the one-request limits: prefill 2 x tokens x active_params / (peak x mfu x
devices) when compute-bound, decode active_params x bytes_per_param / (hbm_bw x mem_bw_eff x devices) per token.

Money is busy device time: busy_s x devices_per_replica x hourly_cost_per_device / 3600, so twice the price
costs twice as much (the seed's `total / hourly_cost` ranked an expensive pool as cheaper; tests/test_costmodel.py
pins that down). A step's busy cost is shared by the tokens it computes. Provisioned cost keeps every replica
of a pool up for the whole window, busy or idle.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TypeVar

import numpy as np

from replay.fleet import PoolSpec

A = TypeVar("A", float, np.ndarray)


@dataclass(frozen=True)
class StepModel:
    """The coefficients of one replica's pass time, from its pool's chip, model and engine settings."""

    pp: int
    s_per_byte: float       # seconds to read one byte at the replica's sustained bandwidth
    s_per_token: float      # seconds of compute per token at the replica's sustained FLOP/s
    kv_bytes: float         # KV cache bytes per token
    weight_bytes: float     # all weights
    active_share: float     # active / total parameters (1 for a dense model)
    overhead_s: float

    @classmethod
    def of(cls, pool: PoolSpec, speed: float = 1.0) -> StepModel:
        """The step model of a pool's replicas, slowed by `speed` (> 1 slower) for replica-to-replica spread."""
        m = pool.model
        return cls(pp=pool.pp, s_per_byte=speed / pool.replica_bytes_per_s,
                   s_per_token=speed * 2.0 * m.active_params_b * 1e9 / pool.replica_flops,
                   kv_bytes=pool.kv_bytes_per_token, weight_bytes=m.weight_bytes,
                   active_share=min(1.0, m.active_params_b / m.total_params_b),
                   overhead_s=speed * pool.step_overhead_ms / 1000.0)

    def weight_bytes_read(self, tokens: float) -> float:
        """Weight bytes one micro-batch of `tokens` tokens reads (all of them for a dense model)."""
        if self.active_share >= 1.0:
            return self.weight_bytes
        return self.weight_bytes * (1.0 - (1.0 - self.active_share) ** max(tokens, 1.0))

    def terms(self, seqs: int, tokens: int, kv_tokens: float, growth: float = 0.0) -> tuple[float, float, float]:
        """(memory, memory added per pass, compute) of a pass, each already x pp, without the overhead.

        `kv_tokens` is the KV the running sequences read now; each later pass of the same batch reads `growth`
        tokens more.
        """
        m = min(self.pp, seqs) or 1
        pp, per_byte = self.pp, self.s_per_byte
        memory = pp * (self.weight_bytes_read(tokens / m) + self.kv_bytes * kv_tokens / m) * per_byte
        return memory, pp * self.kv_bytes * growth / m * per_byte, pp * self.s_per_token * tokens / m

    def pass_seconds(self, seqs: int, tokens: int, kv_tokens: float) -> float:
        """One pass: pp x max(memory, compute) + overhead."""
        memory, _, compute = self.terms(seqs, tokens, kv_tokens)
        return max(memory, compute) + self.overhead_s


def compute_bound_steps(a: float, b: float, c: float) -> float:
    """How many first passes of a run are compute-bound: those j with a + b j < c."""
    if a >= c:
        return 0
    q = (c - a) / b if b > 0.0 else math.inf
    return math.inf if q > 1e15 else math.ceil(q)


def run_seconds(a: float, b: float, c: float, o: float, k: int) -> float:
    """Time of k passes whose j-th takes max(a + b j, c) + o (memory grows linearly with the KV read)."""
    js = compute_bound_steps(a, b, c)
    if k <= js:
        return k * (c + o)
    js = int(js)
    return js * (c + o) + (k - js) * (a + o) + b * (k * (k - 1) - js * (js - 1)) / 2.0


def passes_within(a: float, b: float, c: float, o: float, d: float) -> int:
    """The number of whole passes of such a run that end by time d after its start (the inverse of run_seconds)."""
    if d <= 0.0:
        return 0
    js = compute_bound_steps(a, b, c)
    flat = c + o
    if js == math.inf or d < js * flat:
        k = int(d / flat)
    else:
        js = int(js)
        rest = d - js * flat
        lin, quad = a + o + b * js, b / 2.0
        if quad <= 0.0:
            q = int(rest / lin)
        else:  # quad q^2 + (lin - quad) q - rest = 0
            p = lin - quad
            q = int((-p + math.sqrt(p * p + 4.0 * quad * rest)) / (2.0 * quad))
        k = js + q
    while k > 0 and run_seconds(a, b, c, o, k) > d:  # float rounding of the closed form
        k -= 1
    while run_seconds(a, b, c, o, k + 1) <= d:
        k += 1
    return k


def prefill_seconds(in_tokens: A, cached_tokens: A, pool: PoolSpec) -> A:
    """One-request limit of prefill: the uncached prompt at the replica's sustained FLOP/s."""
    return (in_tokens - cached_tokens) * StepModel.of(pool).s_per_token


def decode_seconds(out_tokens: A, pool: PoolSpec) -> A:
    """One-request limit of decode: every token reads the weights one token touches (the active ones)."""
    step = StepModel.of(pool)
    return out_tokens * step.weight_bytes_read(1.0) * step.s_per_byte


def busy_cost(busy_seconds: A, pool: PoolSpec) -> A:
    """Money for busy time of one replica: seconds x devices x hourly cost per device / 3600."""
    return busy_seconds * pool.replica_cost_per_s


def provisioned_cost(pool: PoolSpec, seconds: float) -> float:
    """Money for keeping all of a pool's serving replicas up for a window, busy or idle."""
    return pool.replicas * pool.replica_cost_per_s * seconds


def kv_transfer_seconds(tokens: A, src: PoolSpec, dst: PoolSpec) -> A:
    """Time to move a request's KV cache between pools over the slower side's interconnect."""
    bw = min(src.interconnect_bytes_per_s, dst.interconnect_bytes_per_s)
    return tokens * src.kv_bytes_per_token / bw


def full_batch_cost(in_tokens: np.ndarray, cached_tokens: np.ndarray, out_tokens: np.ndarray,
                    pool: PoolSpec) -> np.ndarray:
    """What a request costs on a pool running full batches: its share of the steps it takes part in.

    Prefill tokens pay the compute of a token; each output token pays 1/max_concurrency of a pass of
    max_concurrency sequences of about this request's context. Policies rank pools by it.
    """
    step = StepModel.of(pool)
    full = pool.max_concurrency
    context = in_tokens + out_tokens / 2.0
    m = min(step.pp, full)
    memory = step.pp * (step.weight_bytes_read(full / m) + step.kv_bytes * full * context / m) * step.s_per_byte
    compute = step.pp * step.s_per_token * full / m
    per_token = (np.maximum(memory, compute) + step.overhead_s) / full
    return ((in_tokens - cached_tokens) * step.s_per_token + out_tokens * per_token) * pool.replica_cost_per_s
