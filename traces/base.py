"""The traffic contract: the canonical request frame, parse options, and shared row validation.

Every adapter turns source bytes into a raw frame (strings or numbers, one row per source record, with
`seq`, `line` and `record` for accounting) and hands it to `finalize`, which types, validates and splits it
into accepted requests and rejects with reasons. Nothing is dropped silently: read == len(frame) + len(rejects).
"""

from __future__ import annotations

import datetime as dt
import time
from dataclasses import dataclass, field
from typing import Protocol

import polars as pl

from canonical.schemas import RECORD_MAX_CHARS
from canonical.timebounds import DEFAULT_MAX_AGE_DAYS, out_of_bounds
from canonical.timeunits import DAY_MS, epoch_ms
from traces.exceptions import TrafficError

TRAFFIC_SCHEMA: dict[str, pl.DataType] = {
    "seq": pl.Int64(), "arrival_ms": pl.Int64(), "in_tokens": pl.Int64(), "out_tokens": pl.Int64(),
    "cached_tokens": pl.Int64(), "sla_tier": pl.String(), "model": pl.String(), "obs_pool": pl.String(),
    "obs_ttft_s": pl.Float64(), "obs_e2e_s": pl.Float64(), "outcome": pl.String(), "max_tokens": pl.Int64(),
    "hash_ids": pl.List(pl.Int64()), "block_tokens": pl.Int64(), "images": pl.Int64(), "image_tokens": pl.Int64(),
}
# `hash_ids` (the prompt's prefix blocks, traces/blocks.py) and `block_tokens` (their size) are null for a request
# whose trace has no blocks: its recorded cached_tokens is then what the replay takes. `images` (how many the request
# carries) and `image_tokens` (the prompt tokens they become, when the trace knows it) are 0 for a text request;
# `in_tokens` counts its text, and the replay adds the images' tokens to it (replay/plan.py).

# Relative-time traces (Mooncake, BurstGPT) start here unless told otherwise, so re-ingest is idempotent.
DEFAULT_START = dt.datetime(2025, 1, 1, tzinfo=dt.UTC)
DEFAULT_TIER = "standard"


@dataclass(frozen=True)
class ParseOptions:
    """What the command line adds to a trace: defaults for absent fields, a time base and a time scale.

    `model` and `sla_tier` fill rows that carry none. `time_scale` X divides every gap to the first
    arrival by X: arrival = t0 + (t - t0) / X, so X = 2 replays the trace at twice its request rate.
    """

    model: str | None = None
    sla_tier: str | None = None
    start_ms: int = epoch_ms(DEFAULT_START)
    time_scale: float = 1.0
    block_tokens: int | None = None  # tokens per prefix block of the trace's hash_ids (a format may default it)
    # arrivals are held to the samples' time bounds (canonical/timebounds.py) around now
    now_ms: int = field(default_factory=lambda: int(time.time() * 1000))
    max_age_ms: int = DEFAULT_MAX_AGE_DAYS * DAY_MS


@dataclass(frozen=True)
class Parsed:
    """An adapter's output: accepted requests (TRAFFIC_SCHEMA), rejects (line, record, reason), records read."""

    frame: pl.DataFrame
    rejects: pl.DataFrame
    read: int


class TrafficFormat(Protocol):
    """A traffic file format: recognise it, parse it."""

    name: str

    def sniff(self, filename: str, head: bytes) -> bool:
        """True when the file name and first bytes look like this format."""
        ...

    def parse(self, data: bytes, options: ParseOptions) -> Parsed:
        """Bytes in, requests and rejects out; never raises for a bad row, only for an unusable file."""
        ...


MAX_TOKENS = 2**31 - 1  # token counts are stored as 32-bit integers
MAX_OFFSET_MS = 100 * 365 * DAY_MS  # a relative trace longer than a century is a broken timestamp


def _text(col: str) -> pl.Expr:
    return pl.col(col).cast(pl.String).str.strip_chars()


def _missing(col: str) -> pl.Expr:
    return _text(col).is_null() | (_text(col) == "")


def int_check(col: str, label: str, *, required: bool, maximum: int | None = None) -> tuple[pl.Expr, pl.Expr]:
    """(value, reason) expressions for a non-negative whole-number column, at most `maximum` if given."""
    value = _text(col).cast(pl.Int64, strict=False)
    reason = (
        pl.when(_missing(col)).then(pl.lit(f"missing {label}") if required else pl.lit(None, pl.String))
        .when(value.is_null()).then(pl.format(f"bad {label} '{{}}': expected a whole number", _text(col)))
        .when(value < 0).then(pl.format(f"negative {label} {{}}", value))
        .when(value > (maximum if maximum is not None else 2**63 - 1)).then(
            pl.format(f"{label} {{}} is above the largest count stored, {maximum}", value))
        .otherwise(pl.lit(None, pl.String))
    )
    return value, reason


def float_check(col: str, label: str) -> tuple[pl.Expr, pl.Expr]:
    """(value, reason) expressions for an optional non-negative finite number of seconds."""
    value = _text(col).cast(pl.Float64, strict=False)
    reason = (
        pl.when(_missing(col)).then(pl.lit(None, pl.String))
        .when(value.is_null() | value.is_nan() | value.is_infinite())
        .then(pl.format(f"bad {label} '{{}}': expected a number of seconds", _text(col)))
        .when(value < 0).then(pl.format(f"negative {label} {{}}", value))
        .otherwise(pl.lit(None, pl.String))
    )
    return value, reason


def _ensure(raw: pl.DataFrame) -> pl.DataFrame:
    need = {"arrival_ms": pl.Int64(), "cached_tokens": pl.String(), "sla_tier": pl.String(),
            "model": pl.String(), "obs_pool": pl.String(), "obs_ttft_s": pl.String(),
            "obs_e2e_s": pl.String(), "outcome": pl.String(), "max_tokens": pl.String(), "reason": pl.String(),
            "hash_ids": pl.List(pl.Int64()), "images": pl.String(), "image_tokens": pl.String()}
    missing = [pl.lit(None, dtype).alias(c) for c, dtype in need.items() if c not in raw.columns]
    return raw.with_columns(missing) if missing else raw


def finalize(raw: pl.DataFrame, options: ParseOptions, read: int) -> Parsed:
    """Type and validate a raw frame, apply defaults and the time scale, split off rejects.

    `hash_ids`, when the raw frame has it, is already a list of integers per row (or null, with a reason when the
    source's value was not one)."""
    raw = _ensure(raw)
    block = options.block_tokens
    has_blocks = raw["hash_ids"].is_not_null().any()
    if block is not None and block < 1:
        raise TrafficError(f"block size {block}: expected at least 1 token per prefix block")
    if has_blocks and block is None:
        raise TrafficError("the trace has hash_ids but no block size: pass the tokens per prefix block "
                           "(--block-tokens)")
    in_v, in_r = int_check("in_tokens", "in_tokens", required=True, maximum=MAX_TOKENS)
    out_v, out_r = int_check("out_tokens", "out_tokens", required=True, maximum=MAX_TOKENS)
    cached_v, cached_r = int_check("cached_tokens", "cached_tokens", required=False, maximum=MAX_TOKENS)
    max_v, max_r = int_check("max_tokens", "max_tokens", required=False, maximum=MAX_TOKENS)
    img_v, img_r = int_check("images", "images", required=False, maximum=MAX_TOKENS)
    imt_v, imt_r = int_check("image_tokens", "image_tokens", required=False, maximum=MAX_TOKENS)
    ttft_v, ttft_r = float_check("obs_ttft_s", "obs_ttft_s")
    e2e_v, e2e_r = float_check("obs_e2e_s", "obs_e2e_s")
    typed = raw.with_columns(
        pl.coalesce(pl.col("reason"), in_r, out_r, cached_r, max_r, ttft_r, e2e_r, img_r, imt_r).alias("reason"),
        in_v.alias("in_tokens"), out_v.alias("out_tokens"), cached_v.fill_null(0).alias("cached_tokens"),
        img_v.fill_null(0).alias("images"), imt_v.fill_null(0).alias("image_tokens"),
        max_v.alias("max_tokens"), ttft_v.alias("obs_ttft_s"), e2e_v.alias("obs_e2e_s"),
    ).with_columns(
        pl.coalesce(
            pl.col("reason"),
            pl.when(pl.col("arrival_ms").is_null()).then(pl.lit("missing arrival time")),
            out_of_bounds(pl.col("arrival_ms"), "arrival", options.now_ms, options.max_age_ms),
            pl.when(pl.col("cached_tokens") > pl.col("in_tokens")).then(
                pl.format("cached_tokens {} exceed in_tokens {}", "cached_tokens", "in_tokens")),
            pl.when(pl.col("max_tokens") < 1).then(
                pl.format("max_tokens {}: a client asks for at least 1 output token", "max_tokens")),
            pl.when(pl.col("out_tokens") > pl.col("max_tokens")).then(
                pl.format("out_tokens {} exceed the client's max_tokens {}", "out_tokens", "max_tokens")),
            pl.when(pl.col("obs_e2e_s") < pl.col("obs_ttft_s")).then(
                pl.format("obs_e2e_s {} is shorter than obs_ttft_s {}", "obs_e2e_s", "obs_ttft_s")),
            pl.when(pl.col("hash_ids").list.len() > (pl.col("in_tokens") + (block or 1) - 1) // (block or 1)).then(
                pl.format(f"hash_ids names {{}} blocks of {block} tokens, more than in_tokens {{}} fill",
                          pl.col("hash_ids").list.len(), "in_tokens")),
        ).alias("reason"),
    )
    rejects = typed.filter(pl.col("reason").is_not_null()).select(
        pl.col("line").cast(pl.Int64), pl.col("record").cast(pl.String).str.slice(0, RECORD_MAX_CHARS),
        pl.col("reason"))
    good = typed.filter(pl.col("reason").is_null())
    tier, model = options.sla_tier or DEFAULT_TIER, options.model or ""
    frame = good.select(
        pl.col("seq").cast(pl.Int64),
        pl.col("arrival_ms").cast(pl.Int64),
        "in_tokens", "out_tokens", "cached_tokens",
        _blank_to(pl.col("sla_tier"), tier).alias("sla_tier"),
        _blank_to(pl.col("model"), model).alias("model"),
        _blank_to(pl.col("obs_pool"), None).alias("obs_pool"),
        "obs_ttft_s", "obs_e2e_s",
        _blank_to(pl.col("outcome"), None).alias("outcome"),
        "max_tokens",
        pl.col("hash_ids").cast(pl.List(pl.Int64)),
        pl.when(pl.col("hash_ids").is_not_null()).then(pl.lit(block, pl.Int64)).otherwise(pl.lit(None, pl.Int64))
        .alias("block_tokens"),
        "images", "image_tokens",
    )
    return Parsed(scale_time(frame, options.time_scale), rejects, read)


def _blank_to(expr: pl.Expr, default: str | None) -> pl.Expr:
    text = expr.cast(pl.String).str.strip_chars()
    return pl.when(text.is_null() | (text == "")).then(pl.lit(default, pl.String)).otherwise(text)


def scale_time(frame: pl.DataFrame, x: float) -> pl.DataFrame:
    """Divide each arrival's offset from the first arrival by x (x > 1 compresses the trace)."""
    if x == 1.0 or frame.height == 0:
        return frame
    t0 = pl.col("arrival_ms").min()
    return frame.with_columns(
        (t0 + ((pl.col("arrival_ms") - t0).cast(pl.Float64) / x).round(0).cast(pl.Int64)).alias("arrival_ms"))
