"""Mooncake FAST'25 traces: JSONL `{"timestamp", "input_length", "output_length", "hash_ids"}`.

`timestamp` is milliseconds from the start of the trace: arrival = options.start_ms + timestamp.
`hash_ids` name 512-token prefix blocks. A block is paid for by the first request that sends it; a later
request reuses the longest run of leading blocks already sent (prefix caching: a block is reusable only
when every block before it is too), so cached_tokens = 512 x that run, capped at input_length. The cache
is unbounded and shared by the whole trace (no eviction), which makes it an upper bound on reuse.
"""

from __future__ import annotations

import json
from typing import Any

import polars as pl

from traces.base import MAX_OFFSET_MS, Parsed, ParseOptions, finalize
from traces.jsonrows import as_text, records

BLOCK_TOKENS = 512


def _hash_ids(value: Any) -> list[int] | None:
    if isinstance(value, list) and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return value
    return None


def cached_prefix_tokens(hash_ids: list[list[int]], in_tokens: list[int]) -> list[int]:
    """Cached tokens per request, in the order given (which must be arrival order)."""
    seen: set[int] = set()
    out = []
    for ids, tokens in zip(hash_ids, in_tokens, strict=True):
        run = 0
        for block in ids:
            if block not in seen:
                break
            run += 1
        out.append(min(run * BLOCK_TOKENS, tokens))
        seen.update(ids)
    return out


class MooncakeFormat:
    """Mooncake conversation, tool-agent and synthetic traces."""

    name = "mooncake"

    def sniff(self, filename: str, head: bytes) -> bool:
        """The first line is a JSON object with Mooncake's keys."""
        first = head.decode("utf-8-sig", errors="replace").lstrip().splitlines()[:1]
        if not first or not first[0].startswith("{"):
            return False
        return '"input_length"' in first[0] and '"output_length"' in first[0]

    def parse(self, data: bytes, options: ParseOptions) -> Parsed:
        """Parse lines; compute cached prefix tokens over the accepted requests in arrival order."""
        cols: dict[str, list[Any]] = {k: [] for k in (
            "line", "record", "reason", "arrival_ms", "in_tokens", "out_tokens")}
        blocks: list[list[int]] = []
        for line, text, obj, reason in records(data, "mooncake trace"):
            obj = obj or {}
            stamp, ids = obj.get("timestamp"), _hash_ids(obj.get("hash_ids", []))
            if reason is None:
                if stamp is None:
                    reason = "missing timestamp"
                elif isinstance(stamp, bool) or not isinstance(stamp, (int, float)) or not 0 <= stamp <= MAX_OFFSET_MS:
                    reason = (f"bad timestamp {json.dumps(stamp)}: expected milliseconds from 0 to {MAX_OFFSET_MS} "
                              "from trace start")
                elif ids is None:
                    reason = f"bad hash_ids {json.dumps(obj.get('hash_ids'))[:80]}: expected a list of integers"
            ok = reason is None and isinstance(stamp, (int, float))
            cols["line"].append(line)
            cols["record"].append(text)
            cols["reason"].append(reason)
            cols["arrival_ms"].append(options.start_ms + round(stamp) if ok and stamp is not None else None)
            cols["in_tokens"].append(as_text(obj.get("input_length")))
            cols["out_tokens"].append(as_text(obj.get("output_length")))
            blocks.append(ids or [])
        raw = pl.DataFrame(cols, schema={"line": pl.Int64, "record": pl.String, "reason": pl.String,
                                         "arrival_ms": pl.Int64, "in_tokens": pl.String,
                                         "out_tokens": pl.String})
        raw = raw.with_row_index("seq").with_columns(pl.col("seq").cast(pl.Int64))
        parsed = finalize(raw, options, raw.height)
        frame = parsed.frame.sort("arrival_ms", "seq", maintain_order=True)
        cached = cached_prefix_tokens([blocks[s] for s in frame["seq"].to_list()],
                                      frame["in_tokens"].to_list())
        frame = frame.with_columns(pl.Series("cached_tokens", cached, dtype=pl.Int64)).sort("seq")
        return Parsed(frame, parsed.rejects, parsed.read)


FORMAT = MooncakeFormat()
