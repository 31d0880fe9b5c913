"""The roofline cost model: prefill is compute-bound, decode is memory-bound, money is busy device time.

    prefill_s = 2 x (in_tokens - cached_tokens) x active_params / (peak_flops x mfu x devices_per_replica)
    decode_s  = out_tokens x active_params x bytes_per_param / (hbm_bw x mem_bw_eff x devices_per_replica)
    cost_usd  = busy_s x devices_per_replica x hourly_cost_per_device / 3600 / max_concurrency

A replica has max_concurrency slots that each run at single-request speed (decode reads the weights once
per step for the whole batch, so batching is close to free while memory-bound); a request's cost is its
slot's share of the replica. The seed's `total / hourly_cost` ranked an expensive pool as cheaper; cost here
grows in proportion to price, which tests/test_costmodel.py pins down.

Functions take numpy arrays (vectorized over requests) or plain floats.
"""

from __future__ import annotations

from typing import TypeVar

import numpy as np

from replay.fleet import PoolSpec

A = TypeVar("A", float, np.ndarray)


def prefill_seconds(in_tokens: A, cached_tokens: A, pool: PoolSpec) -> A:
    """Time to process the uncached prompt on one replica."""
    return 2.0 * (in_tokens - cached_tokens) * pool.model.active_params_b * 1e9 / pool.replica_flops


def decode_seconds(out_tokens: A, pool: PoolSpec) -> A:
    """Time to generate the output: every token reads the active weights once."""
    per_token = pool.model.active_params_b * 1e9 * pool.model.bytes_per_param / pool.replica_bytes_per_s
    return out_tokens * per_token


def slot_cost(busy_seconds: A, pool: PoolSpec) -> A:
    """Money for busy time on one slot: the slot's share of its replica's devices."""
    return busy_seconds * pool.replica_cost_per_s / pool.max_concurrency


def kv_transfer_seconds(tokens: A, src: PoolSpec, dst: PoolSpec) -> A:
    """Time to move a request's KV cache between pools over the slower side's interconnect."""
    bw = min(src.interconnect_bytes_per_s, dst.interconnect_bytes_per_s)
    return tokens * src.model.kv_bytes_per_token / bw


def provisioned_cost(pool: PoolSpec, seconds: float) -> float:
    """Money for keeping all of a pool's serving replicas up for a window, busy or idle."""
    return pool.replicas * pool.replica_cost_per_s * seconds
