"""The project's own JSON Lines request format (see traces.canonical for the keys)."""

from __future__ import annotations

from typing import Any

import polars as pl

from traces.base import Parsed, ParseOptions
from traces.canonical import OPTIONAL, REQUIRED, from_raw
from traces.jsonrows import as_text, records

KEYS = ("arrival", "arrival_ms", *REQUIRED, *OPTIONAL)


class JsonlFormat:
    """hetpool request JSON Lines."""

    name = "jsonl"

    def sniff(self, filename: str, head: bytes) -> bool:
        """A first line that is a JSON object with in_tokens."""
        first = head.decode("utf-8-sig", errors="replace").lstrip().splitlines()[:1]
        return bool(first) and first[0].startswith("{") and '"in_tokens"' in first[0]

    def parse(self, data: bytes, options: ParseOptions) -> Parsed:
        """Parse lines; keys absent from every line are treated as absent columns."""
        cols: dict[str, list[Any]] = {k: [] for k in ("line", "record", "reason", *KEYS)}
        present: set[str] = set()
        for line, text, obj, reason in records(data, "traffic JSONL"):
            obj = obj or {}
            present.update(k for k in obj if k in KEYS)
            cols["line"].append(line)
            cols["record"].append(text)
            cols["reason"].append(reason)
            for key in KEYS:
                cols[key].append(as_text(obj.get(key)))
        if "arrival_ms" in present:
            present.discard("arrival")
        present.update(REQUIRED)
        if "arrival_ms" not in present:
            present.add("arrival")
        schema = {"line": pl.Int64, "record": pl.String, "reason": pl.String, **{k: pl.String for k in KEYS}}
        raw = pl.DataFrame(cols, schema=schema).select("line", "record", "reason", *sorted(present))
        raw = raw.with_row_index("seq").with_columns(pl.col("seq").cast(pl.Int64))
        return from_raw(raw, options, raw.height, "traffic JSONL")


FORMAT = JsonlFormat()
