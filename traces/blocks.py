"""Prefix blocks: the hashes a gateway computes over a prompt, `block_tokens` tokens each, and what a cache of them
saves.

A request's `hash_ids` name its prompt's blocks in order: block k holds tokens [k x block_tokens, (k + 1) x
block_tokens), the last one possibly partial. Equal ids mean equal prefixes up to and including that block (the
hash chains over the prefix, as vLLM's and Mooncake's do), so a cache reuses only a leading run of blocks. A trace
without blocks keeps the `cached_tokens` it recorded; a trace with them has its reuse replayed per replica.
"""

from __future__ import annotations

MOONCAKE_BLOCK_TOKENS = 512  # the block size of Mooncake's released traces (their README)


def reused_tokens(run: int, block_tokens: int, in_tokens: int) -> int:
    """Prompt tokens served from a cache that holds the request's first `run` blocks: at most all but one, since an
    engine computes at least the last prompt token to produce the first output token."""
    cached = run * block_tokens
    most = in_tokens - 1
    if cached > most:
        cached = most
    return cached if cached > 0 else 0


def block_sizes(n_blocks: int, block_tokens: int, in_tokens: int) -> list[int]:
    """Tokens in each of a prompt's blocks: full ones, then what the last one covers."""
    return [min(block_tokens, in_tokens - k * block_tokens) for k in range(n_blocks)]


def max_blocks(in_tokens: int, block_tokens: int) -> int:
    """The most blocks a prompt of in_tokens has: ceil(in_tokens / block_tokens)."""
    return -(-in_tokens // block_tokens)


def trace_wide_reuse(hash_ids: list[list[int]], in_tokens: list[int], block_tokens: int) -> list[int]:
    """Cached tokens per request (in arrival order) with one unbounded cache shared by the whole trace: the upper
    bound of reuse, which a single replica with room for every block reaches."""
    seen: set[int] = set()
    out = []
    for ids, tokens in zip(hash_ids, in_tokens, strict=True):
        run = 0
        for block in ids:
            if block not in seen:
                break
            run += 1
        out.append(reused_tokens(run, block_tokens, tokens))
        seen.update(ids)
    return out


def as_hash_ids(value: object) -> list[int] | None:
    """A list of 64-bit integers from a JSON list, or from text holding one (`[1, 2, 3]`) or integers separated by
    spaces (`1 2 3`); None when it is none of these."""
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            text = text[1:-1] if text.endswith("]") else "x"
        parts = text.replace(",", " ").split()
        try:
            value = [int(p) for p in parts]
        except ValueError:
            return None
    if isinstance(value, (list, tuple)) and all(
            isinstance(v, int) and not isinstance(v, bool) and -(2**63) <= v < 2**63 for v in value):
        return list(value)
    return None
