"""Static hard constraints of a request on a pool, from what a gateway knows: model served, context window, KV memory.

A request is refused for its size only when what its client sent cannot fit: its prompt plus the `max_tokens` it
asked for, or, when it asked for none, its prompt plus one output token (an engine admits every prompt shorter
than its window and stops generating at the window). The output length a router predicts ranks pools, plans KV
and predicts latency; it never refuses a request. Memory: the engine may use gpu_memory_utilization of the
replica's HBM (capacity in GB = 1e9 bytes as on spec sheets); after the weights, the rest is KV cache, which must
hold that context. The SLA and queue-limit constraints depend on the moment and are checked by the policies.
"""

from __future__ import annotations

import numpy as np

from replay.fleet import PoolSpec


def needed_context(in_tokens: np.ndarray, max_tokens: np.ndarray) -> np.ndarray:
    """The context a request must be able to hold: its prompt plus the client's max_tokens (0: none sent, then one
    output token)."""
    return in_tokens + np.maximum(max_tokens, 1)


def needed_bytes(context_tokens: np.ndarray, pool: PoolSpec) -> np.ndarray:
    """Bytes one replica needs for the weights (a vision encoder's too) and this request's KV cache."""
    return pool.model.resident_bytes + pool.kv_bytes_held_per_token * context_tokens


def fits_memory(context_tokens: np.ndarray, pool: PoolSpec) -> np.ndarray:
    """True where weights plus the request's KV cache fit the memory the engine may use."""
    return context_tokens <= pool.kv_capacity_tokens


def fits_context(context_tokens: np.ndarray, pool: PoolSpec) -> np.ndarray:
    """True where the request is within the model's context window."""
    return context_tokens <= pool.model.max_context


def serves_model(models: np.ndarray, pool: PoolSpec) -> np.ndarray:
    """True where the request names the pool's model or names none ('' runs on whatever a pool serves)."""
    return (models == "") | (models == pool.model.id)


def feasible(models: np.ndarray, context_tokens: np.ndarray, pool: PoolSpec) -> np.ndarray:
    """All static constraints at once, for the context a request needs (needed_context)."""
    return serves_model(models, pool) & fits_context(context_tokens, pool) & fits_memory(context_tokens, pool)


def why_not(model: str, prompt: int, max_tokens: int, pools: tuple[PoolSpec, ...],
            images: tuple[int, int] = (0, 0)) -> str:
    """Why no pool can ever take a request, naming the closest miss and what the client sent (with its images:
    their count and the prompt tokens they became, which `prompt` includes)."""
    serving = [p for p in pools if model in ("", p.model.id)]
    if not serving:
        known = ", ".join(sorted({p.model.id for p in pools}))
        return f"no pool serves model '{model}'; served: {known}"
    if images[0] or images[1]:
        seeing = [p for p in serving if p.model.vision is not None]
        if not seeing:
            what = f"{images[0]} image{'s' if images[0] != 1 else ''}" if images[0] else f"{images[1]} image tokens"
            names = ", ".join(sorted({p.model.id for p in serving}))
            return f"the request carries {what}, but model {names} has no vision encoder (no 'vision' in the registry)"
        serving = seeing
    need = int(needed_context(np.array([prompt]), np.array([max_tokens]))[0])
    sent = (f"prompt of {prompt:,} tokens plus max_tokens {max_tokens:,}" if max_tokens > 0
            else f"prompt of {prompt:,} tokens and one output token")
    in_window = [p for p in serving if need <= p.model.max_context]
    if not in_window:
        widest = max(p.model.max_context for p in serving)
        return f"{sent} exceed every model window (largest {widest:,})"
    best = max(in_window, key=lambda p: p.usable_memory_bytes - float(needed_bytes(np.array([need]), p)[0]))
    need_gb = float(needed_bytes(np.array([need]), best)[0]) / 1e9
    return (f"{sent} need {need_gb:.1f} GB for weights and KV cache; largest replica may use "
            f"{best.usable_memory_bytes / 1e9:.1f} GB ({best.id}: {best.devices_per_replica} x "
            f"{best.chip.hbm_capacity_gb:g} GB x gpu_memory_utilization {best.gpu_memory_utilization:g})")
