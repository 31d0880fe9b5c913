"""BurstGPT CSV: `Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type[,...]`.

`Timestamp` is seconds from the start of the trace: arrival = options.start_ms + 1000 x Timestamp.
`Model` (ChatGPT, GPT-4) names the upstream service, not a model of this fleet, so requests take the
--model default instead. A row with zero response tokens is a failed request in BurstGPT: it is kept,
because its prompt still arrived and was processed, with outcome 'error' and out_tokens 0; any other
row gets outcome 'ok'. A row whose Total tokens is not Request + Response tokens is rejected.
"""

from __future__ import annotations

import polars as pl

from traces.base import MAX_OFFSET_MS, Parsed, ParseOptions, finalize
from traces.csvrows import decode, read_rows

COLUMNS = ("Timestamp", "Request tokens", "Response tokens")
TOTAL = "Total tokens"


class BurstGptFormat:
    """BurstGPT Azure OpenAI GPT service trace."""

    name = "burstgpt"

    def sniff(self, filename: str, head: bytes) -> bool:
        """The header names BurstGPT's token columns."""
        first = head.decode("utf-8-sig", errors="replace").splitlines()[:1]
        return bool(first) and "Request tokens" in first[0] and "Response tokens" in first[0]

    def parse(self, data: bytes, options: ParseOptions) -> Parsed:
        """Parse the CSV; time offsets must be non-negative seconds."""
        raw, read = read_rows(decode(data, "burstgpt trace"), "burstgpt trace", COLUMNS)
        stamp = pl.col("Timestamp").str.strip_chars()
        seconds = stamp.cast(pl.Float64, strict=False)
        req = pl.col("Request tokens").str.strip_chars().cast(pl.Int64, strict=False)
        resp = pl.col("Response tokens").str.strip_chars().cast(pl.Int64, strict=False)
        checks = [
            pl.col("reason"),
            pl.when(stamp.is_null() | (stamp == "")).then(pl.lit("missing Timestamp"))
            .when(seconds.is_null() | seconds.is_nan() | (seconds < 0) | (seconds > MAX_OFFSET_MS / 1000)).then(
                pl.format(f"bad Timestamp '{{}}': expected seconds from 0 to {MAX_OFFSET_MS // 1000} from trace "
                          "start", stamp)),
        ]
        if TOTAL in raw.columns:
            total = pl.col(TOTAL).str.strip_chars().cast(pl.Int64, strict=False)
            checks.append(pl.when(total.is_not_null() & req.is_not_null() & resp.is_not_null()
                                  & (total != req + resp)).then(
                pl.format("Total tokens {} != Request tokens {} + Response tokens {}", total, req, resp)))
        raw = raw.with_columns(
            pl.coalesce(*checks).alias("reason"),
            # a NaN offset is rejected above; as null here it does not stop the cast of the others
            (pl.lit(options.start_ms) + (seconds.fill_nan(None).clip(0, MAX_OFFSET_MS / 1000) * 1000).round(0)
             .cast(pl.Int64)).alias("arrival_ms"),
            pl.col("Request tokens").alias("in_tokens"),
            pl.col("Response tokens").alias("out_tokens"),
            pl.when(resp == 0).then(pl.lit("error")).otherwise(pl.lit("ok")).alias("outcome"),
        )
        return finalize(raw, options, read)


FORMAT = BurstGptFormat()
