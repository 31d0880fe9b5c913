"""Azure LLM inference trace (2023/2024): CSV `TIMESTAMP,ContextTokens,GeneratedTokens`.

TIMESTAMP is wall-clock time with up to 7 fractional digits and no zone (`2023-11-16 18:17:03.9799600`);
it is taken as UTC. ContextTokens are prompt tokens, GeneratedTokens output tokens. No model, tier or
observed latency: those come from the command-line defaults.
"""

from __future__ import annotations

import polars as pl

from traces.base import Parsed, ParseOptions, finalize
from traces.csvrows import decode, read_rows

COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")


class AzureFormat:
    """Azure public LLM inference trace."""

    name = "azure"

    def sniff(self, filename: str, head: bytes) -> bool:
        """The header names the three Azure columns."""
        first = head.decode("utf-8-sig", errors="replace").splitlines()[:1]
        return bool(first) and [c.strip() for c in first[0].split(",")][:3] == list(COLUMNS)

    def parse(self, data: bytes, options: ParseOptions) -> Parsed:
        """Parse the CSV; an unparseable TIMESTAMP rejects its row."""
        raw, read = read_rows(decode(data, "azure trace"), "azure trace", COLUMNS)
        stamp = pl.col("TIMESTAMP").str.strip_chars()
        parsed = stamp.str.strptime(pl.Datetime("us", "UTC"), "%Y-%m-%d %H:%M:%S%.f", strict=False)
        raw = raw.with_columns(
            (parsed.dt.epoch("us") // 1000).alias("arrival_ms"),
            pl.coalesce(
                pl.col("reason"),
                pl.when(stamp.is_null() | (stamp == "")).then(pl.lit("missing TIMESTAMP"))
                .when(parsed.is_null()).then(
                    pl.format("unparseable TIMESTAMP '{}': expected YYYY-MM-DD HH:MM:SS.fffffff", stamp)),
            ).alias("reason"),
            pl.col("ContextTokens").alias("in_tokens"),
            pl.col("GeneratedTokens").alias("out_tokens"),
        )
        return finalize(raw, options, read)


FORMAT = AzureFormat()
