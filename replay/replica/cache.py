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

from typing import Final

from traces.blocks import reused_tokens

# A block's entry packs three counts in one int, so that each step of its life (referenced, released, evicted) is
# one dictionary operation, not one per field: the cache's cost is per block, and at 20 blocks a request these
# operations are most of a replay's time with prefix blocks. Bits 0-19: the running sequences referencing it;
# from bit 20, 28 bits: its tokens; from bit 48: its places in the LRU queue. Final: compiled, the constants are
# inlined rather than looked up as globals.
COUNT: Final = (1 << 20) - 1
SIZE: Final = 1 << 20
TOKENS: Final = (1 << 28) - 1
PLACE: Final = 1 << 48
SLACK: Final = 1024  # stale places the queue may hold beyond twice the blocks before it is rebuilt


class PrefixCache:
    """The blocks one replica holds: each with its reference count and size, the unreferenced ones in LRU order.

    The LRU order is a queue a block joins at its tail each time its last reference is dropped; a block referenced
    again keeps its old place, which goes stale (its count is no longer 0, or it joined again later), and eviction
    skips stale places. A list read from a head index is the queue: appending and reading it are the cheapest
    operations a compiled replica has, where an ordered dictionary's are general method calls."""

    __slots__ = ("entry", "evicted", "head", "queue", "slack", "unref_tokens")

    def __init__(self, slack: int = SLACK) -> None:
        self.slack = slack                 # places allowed beyond twice the blocks (a test's negative: rebuild always)
        self.entry: dict[int, int] = {}   # block -> its counts, packed as above
        self.queue: list[int] = []        # blocks in the order their last reference was dropped, from `head`
        self.head = 0
        self.unref_tokens = 0              # tokens of the unreferenced blocks
        self.evicted = 0                   # blocks evicted so far

    def refs(self, b: int) -> int:
        """Running sequences referencing block b (0: cached and evictable); -1 when it is not held."""
        v = self.entry.get(b, -1)
        return v & COUNT if v >= 0 else -1

    def tokens(self, b: int) -> int:
        """Tokens of block b, as the prefill that computed it held them."""
        return (self.entry[b] >> 20) & TOKENS

    def unreferenced(self) -> list[int]:
        """The unreferenced blocks, least recently used first (the order eviction takes them)."""
        entry, seen, out = self.entry, set(), []
        for b in reversed(self.queue[self.head:]):
            if b not in seen:
                seen.add(b)
                if entry[b] & COUNT == 0:
                    out.append(b)
        out.reverse()
        return out

    def run(self, ids: list[int]) -> int:
        """Blocks of the leading run of ids present now (what a router reads; changes nothing)."""
        entry = self.entry
        n = 0
        for b in ids:
            if b not in entry:
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
        entry = self.entry
        shared = 0
        for b in ids:
            v = entry.get(b, 0)
            if v & COUNT:
                shared += (v >> 20) & TOKENS
        return -shared

    def acquire(self, ids: list[int], block: int, in_tokens: int) -> tuple[int, int]:
        """Reference a prefill's blocks at its admission: (prompt tokens it reuses, its kv_held change beyond its whole
        context, as `charge`)."""
        entry = self.entry
        run = 0
        leading = True
        shared = 0
        start = 0
        for b in ids:
            v = entry.get(b, -1)
            if v < 0:
                leading = False
                s = in_tokens - start
                entry[b] = (s if s < block else block if s > 0 else 0) * SIZE + 1
                start += block
                continue
            start += block
            if leading:
                run += 1
            if v & COUNT == 0:  # cached: referenced again, its place in the queue goes stale
                self.unref_tokens -= (v >> 20) & TOKENS
            else:
                shared += (v >> 20) & TOKENS  # a block's size is the one it was created with, whoever shares it
            entry[b] = v + 1
        return reused_tokens(run, block, in_tokens), -shared

    def release(self, ids: list[int]) -> int:
        """Drop a sequence's references, last block first: its kv_held change beyond its whole context (minus the
        tokens of its blocks others still reference)."""
        entry, queue = self.entry, self.queue
        shared = 0
        k = len(ids)
        while k > 0:
            k -= 1
            b = ids[k]
            v = entry[b] - 1
            if v & COUNT == 0:
                queue.append(b)
                entry[b] = v + PLACE
                self.unref_tokens += (v >> 20) & TOKENS
            else:
                entry[b] = v
                shared += (v >> 20) & TOKENS
        if len(queue) - self.head > 2 * len(entry) + self.slack:
            self._rebuild()
        return -shared

    def evict(self, room: int) -> None:
        """Evict unreferenced blocks, least recently used first, until they take at most `room` tokens."""
        entry, queue = self.entry, self.queue
        unref, head, end = self.unref_tokens, self.head, len(self.queue)
        evicted = 0
        while unref > room and head < end:
            b = queue[head]
            head += 1
            v = entry[b] - PLACE
            if v >= PLACE or v & COUNT:  # a stale place: the block joined again later, or is referenced
                entry[b] = v
                continue
            del entry[b]
            unref -= (v >> 20) & TOKENS
            evicted += 1
        self.unref_tokens, self.evicted = unref, self.evicted + evicted
        if head > SLACK and 2 * head > end:
            del queue[:head]
            head = 0
        self.head = head

    def _rebuild(self) -> None:
        """The queue without its stale places: each unreferenced block at its last place, in order."""
        entry, keep, seen = self.entry, [], set()
        for b in reversed(self.queue[self.head:]):
            if b in seen:
                continue
            seen.add(b)
            v = entry[b] & (PLACE - 1)
            if v & COUNT == 0:
                keep.append(b)
                v += PLACE
            entry[b] = v
        keep.reverse()
        self.queue, self.head = keep, 0

    def clear(self) -> None:
        """Lose every block (the replica failed)."""
        self.entry, self.queue, self.head = {}, [], 0
        self.unref_tokens = 0
