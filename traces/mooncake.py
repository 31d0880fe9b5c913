"""Mooncake FAST'25 traces: JSONL `{"timestamp", "input_length", "output_length", "hash_ids"}`.

`timestamp` is milliseconds from the start of the trace: arrival = options.start_ms + timestamp.
`hash_ids` name 512-token prefix blocks (another size with ParseOptions.block_tokens); every request keeps them,
and the replay caches them per replica, so that reuse follows routing, KV capacity and eviction. The recorded
`cached_tokens` is the trace-wide figure (traces/blocks.trace_wide_reuse): one unbounded cache shared by the whole
trace, the upper bound a single replica with room for every block reaches.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import polars as pl

from traces.base import MAX_OFFSET_MS, Parsed, ParseOptions, finalize
from traces.blocks import MOONCAKE_BLOCK_TOKENS, as_hash_ids, trace_wide_reuse
from traces.jsonrows import as_text, records


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
        """Parse lines, keep each request's blocks; the trace-wide reuse over the accepted requests in arrival order
        is the recorded cached_tokens."""
        block = options.block_tokens or MOONCAKE_BLOCK_TOKENS
        options = dataclasses.replace(options, block_tokens=block)
        cols: dict[str, list[Any]] = {k: [] for k in (
            "line", "record", "reason", "arrival_ms", "in_tokens", "out_tokens")}
        blocks: list[list[int]] = []
        for line, text, obj, reason in records(data, "mooncake trace"):
            obj = obj or {}
            stamp, given = obj.get("timestamp"), obj.get("hash_ids", [])
            ids = as_hash_ids(given) if isinstance(given, list) else None
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
        cols["hash_ids"] = blocks
        raw = pl.DataFrame(cols, schema={"line": pl.Int64, "record": pl.String, "reason": pl.String,
                                         "arrival_ms": pl.Int64, "in_tokens": pl.String,
                                         "out_tokens": pl.String, "hash_ids": pl.List(pl.Int64)})
        raw = raw.with_row_index("seq").with_columns(pl.col("seq").cast(pl.Int64))
        parsed = finalize(raw, options, raw.height)
        frame = parsed.frame.sort("arrival_ms", "seq", maintain_order=True)
        cached = trace_wide_reuse([blocks[s] for s in frame["seq"].to_list()], frame["in_tokens"].to_list(), block)
        frame = frame.with_columns(pl.Series("cached_tokens", cached, dtype=pl.Int64)).sort("seq")
        return Parsed(frame, parsed.rejects, parsed.read)


FORMAT = MooncakeFormat()
