"""The project's own request schema, shared by its CSV, JSONL and Parquet formats.

Columns: `arrival` (ISO 8601; without a zone it is UTC) or `arrival_ms` (epoch ms); `in_tokens` and
`out_tokens` (required); optional `cached_tokens`, `max_tokens` (the output limit the client sent, when it sent
one), `sla_tier`, `model`, `obs_pool`, `obs_ttft_s`, `obs_e2e_s`, `outcome`, and `hash_ids`: the prompt's prefix
blocks as a list of integers (a JSON list, in CSV a quoted `"[1, 2, 3]"` or `1 2 3`), whose size in tokens is the
trace option `block_tokens` (--block-tokens); `images`, how many images the request carries, and `image_tokens`,
the prompt tokens they become when the trace knows it (whole numbers; `in_tokens` counts the text alone). Unknown
columns are ignored.
"""

from __future__ import annotations

import datetime as dt

import polars as pl

from traces.base import Parsed, ParseOptions, epoch_ms, finalize, int_check
from traces.blocks import as_hash_ids
from traces.exceptions import TrafficError

REQUIRED = ("in_tokens", "out_tokens")
OPTIONAL = ("cached_tokens", "max_tokens", "sla_tier", "model", "obs_pool", "obs_ttft_s", "obs_e2e_s", "outcome",
            "hash_ids", "images", "image_tokens")


def _iso_ms(text: str | None) -> int | str:
    """Epoch ms of an ISO 8601 string, or the reason it is not one."""
    if text is None or not text.strip():
        return "missing arrival"
    try:
        return epoch_ms(dt.datetime.fromisoformat(text.strip()))
    except ValueError:
        return f"unparseable arrival '{text.strip()}': expected ISO 8601 such as 2025-01-01T00:00:00Z"


def check_columns(columns: list[str], source: str) -> None:
    """Refuse a file that lacks a required column, naming what it has."""
    absent = [c for c in REQUIRED if c not in columns]
    if "arrival" not in columns and "arrival_ms" not in columns:
        absent.insert(0, "arrival or arrival_ms")
    if absent:
        raise TrafficError(f"{source}: missing column {', '.join(repr(c) for c in absent)}; "
                           f"has: {', '.join(columns) or '(nothing)'}")


def from_raw(raw: pl.DataFrame, options: ParseOptions, read: int, source: str) -> Parsed:
    """Validate a raw frame in the canonical schema (any column types) and finalize it."""
    check_columns(raw.columns, source)
    if "reason" not in raw.columns:
        raw = raw.with_columns(pl.lit(None, pl.String).alias("reason"))
    if "arrival_ms" in raw.columns:
        value, reason = int_check("arrival_ms", "arrival_ms", required=True)
        raw = raw.with_columns(value.alias("arrival_ms"), pl.coalesce("reason", reason).alias("reason"))
    else:
        parsed = [_iso_ms(v) for v in raw["arrival"].cast(pl.String).to_list()]
        raw = raw.with_columns(
            pl.Series("arrival_ms", [v if isinstance(v, int) else None for v in parsed], dtype=pl.Int64),
            pl.coalesce(pl.col("reason"), pl.Series("_r", [v if isinstance(v, str) else None for v in parsed],
                                                     dtype=pl.String)).alias("reason"),
        )
    if "hash_ids" in raw.columns:
        raw = _hash_ids(raw)
    keep = ["seq", "line", "record", "reason", "arrival_ms", *REQUIRED,
            *(c for c in OPTIONAL if c in raw.columns)]
    return finalize(raw.select(keep), options, read)


def _hash_ids(raw: pl.DataFrame) -> pl.DataFrame:
    """The hash_ids column as lists of integers; a value that is not one rejects its row, a blank one is none."""
    values = raw["hash_ids"].to_list()
    ids: list[list[int] | None] = []
    reasons: list[str | None] = []
    for v in values:
        blank = v is None or (isinstance(v, str) and not v.strip())
        got = None if blank else as_hash_ids(v)
        ids.append(got)
        reasons.append(None if blank or got is not None else
                       f"bad hash_ids '{str(v)[:80]}': expected a list of integers such as [1, 2, 3]")
    return raw.with_columns(
        pl.Series("hash_ids", ids, dtype=pl.List(pl.Int64)),
        pl.coalesce(pl.col("reason"), pl.Series("_r", reasons, dtype=pl.String)).alias("reason"))
