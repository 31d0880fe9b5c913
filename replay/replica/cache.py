"""A replica's prefix cache: the prompt blocks its prefills computed, kept in the KV memory its running sequences
leave free, evicted least recently used first.

A block is present from the admission of the prefill that computes it (a later prefill on the replica is scheduled
behind it, first come first served, and shares it rather than computing it again) until it is evicted. A running
sequence references its blocks; a block no running sequence references stays cached in free memory and is the
first to go, least recently used first, when memory is needed. A sequence's blocks are released last block first,
so that a prompt's tail is evicted before its head (as vLLM frees them) and shared prefixes last longest.

The replica's `kv_held` counts each referenced block once, however many sequences share it: a sequence adds its
private tokens (its context less its blocks) and the blocks it is the first to reference. Unreferenced blocks are
`unref_tokens`, outside `kv_held`. A request reuses the leading run of its blocks present when its prefill starts
(traces/blocks.reused_tokens: all but its last prompt token at most).
"""

from __future__ import annotations

from collections import OrderedDict

from traces.blocks import reused_tokens


class PrefixCache:
    """The blocks one replica holds: each with its reference count and size, the unreferenced ones in LRU order."""

    __slots__ = ("evicted", "lru", "ref", "size", "unref_tokens")

    def __init__(self) -> None:
        self.ref: dict[int, int] = {}      # block -> running sequences referencing it (0: cached, evictable)
        self.size: dict[int, int] = {}     # block -> its tokens
        # the unreferenced blocks, least recently used first: an OrderedDict pops its oldest in constant time, where a
        # dict's first key is found by walking past every slot deleted before it (quadratic over a long run)
        self.lru: OrderedDict[int, None] = OrderedDict()
        self.unref_tokens = 0              # tokens of the unreferenced blocks
        self.evicted = 0                   # blocks evicted so far

    def run(self, ids: list[int]) -> int:
        """Blocks of the leading run of ids present now (what a router reads; changes nothing)."""
        ref = self.ref
        n = 0
        for b in ids:
            if b not in ref:
                break
            n += 1
        return n

    def hit(self, ids: list[int], block: int, in_tokens: int) -> int:
        """Prompt tokens a request with these blocks would reuse if its prefill started now."""
        run = self.run(ids)
        return reused_tokens(run, block, in_tokens) if run else 0

    def charge(self, ids: list[int]) -> int:
        """Tokens by which admitting these blocks would change kv_held beyond the sequence's whole context: minus
        the tokens of its blocks already referenced by others (never positive)."""
        ref, size = self.ref, self.size
        shared = 0
        for b in ids:
            if ref.get(b, 0) > 0:
                shared += size[b]
        return -shared

    def acquire(self, ids: list[int], block: int, in_tokens: int) -> tuple[int, int]:
        """Reference a prefill's blocks at its admission: (prompt tokens it reuses, its kv_held change beyond its whole
        context, as `charge`)."""
        ref, size, lru = self.ref, self.size, self.lru
        run = 0
        leading = True
        shared = 0
        start = 0
        for b in ids:
            s = in_tokens - start
            if s > block:
                s = block
            start += block
            c = ref.get(b, -1)
            if c < 0:
                leading = False
                ref[b] = 1
                size[b] = s
                continue
            if leading:
                run += 1
            if c == 0:
                del lru[b]
                self.unref_tokens -= size[b]
            else:
                shared += size[b]  # a block's size is the one it was created with, whoever shares it
            ref[b] = c + 1
        return reused_tokens(run, block, in_tokens), -shared

    def release(self, ids: list[int]) -> int:
        """Drop a sequence's references, last block first: its kv_held change beyond its whole context (minus the
        tokens of its blocks others still reference)."""
        ref, size, lru = self.ref, self.size, self.lru
        shared = 0
        k = len(ids)
        while k > 0:
            k -= 1
            b = ids[k]
            c = ref[b] - 1
            ref[b] = c
            if c == 0:
                lru[b] = None
                self.unref_tokens += size[b]
            else:
                shared += size[b]
        return -shared

    def evict(self, room: int) -> None:
        """Evict unreferenced blocks, least recently used first, until they take at most `room` tokens."""
        lru, ref, size = self.lru, self.ref, self.size
        while self.unref_tokens > room and lru:
            b = lru.popitem(last=False)[0]
            del ref[b]
            self.unref_tokens -= size.pop(b)
            self.evicted += 1

    def clear(self) -> None:
        """Lose every block (the replica failed)."""
        self.ref, self.size, self.lru = {}, {}, OrderedDict()
        self.unref_tokens = 0
