"""Bitmask error signals (a throttle-reason mask where a code is expected): which values can be read as masks,
why the others are rejected, and which bits turned on between two values.

Each bit of the mask is its own code, so one sample can be several events; a bit that stays set is one event
when it turns on, not one per scrape, as a sticky code is.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import polars as pl

from normalizers.profile import MAX_BITS, ErrorMap
from normalizers.series import Resolution

ALL_BITS = (1 << MAX_BITS) - 1
_LIMIT = float(1 << MAX_BITS)


def unknown_bits(spec: ErrorMap) -> int:
    """The bits of a mask that the profile does not name: any of them set makes the sample a reject."""
    return ALL_BITS & ~spec.known_mask


def checks(expr: Any, not_mask: int, unknown_bit: int) -> Any:
    """Extend a when/then chain of check codes with the bitmask checks (series without a mask pass)."""
    v, unknown = pl.col("value"), pl.col("unknown_bits")
    is_mask = unknown.is_not_null()
    return (expr.when(is_mask & ((v < 0) | (v >= _LIMIT) | (v != v.floor()))).then(not_mask)
            .when(is_mask & ((v.cast(pl.UInt64, strict=False) & unknown) != 0)).then(unknown_bit))


def not_mask_reason() -> pl.Expr:
    """Why a bitmask sample that is not a whole number in range is rejected."""
    return pl.format("value {} of {} is not a bitmask; expected a whole number from 0 to 2^{}-1",
                     pl.col("value"), pl.col("name"), pl.lit(MAX_BITS))


def with_bit_reasons(bad: pl.DataFrame, series: Sequence[Resolution], code: int) -> pl.DataFrame:
    """Add `bit_reason`, naming the unknown set bits and the known ones, to rejects of check `code` (`sid` indexes
    `series`)."""
    if not (bad.get_column("code") == code).any():
        return bad.with_columns(bit_reason=pl.lit(None, pl.String))
    texts = [_unknown_text(series[sid], value) if c == code else None
             for sid, value, c in bad.select("sid", "value", "code").iter_rows()]
    return bad.with_columns(bit_reason=pl.Series(texts, dtype=pl.String))


def _unknown_text(r: Resolution, value: float) -> str:
    assert r.error is not None
    spec = r.error.spec
    mask = int(value)
    extra = [str(b) for b in range(MAX_BITS) if (mask & unknown_bits(spec)) >> b & 1]
    known = ", ".join(str(b) if c.code == str(b) else f"{b} ({c.code})" for b, c in sorted(spec.bits.items()))
    return (f"value {mask} of {r.name} sets bit{'s' if len(extra) > 1 else ''} {', '.join(extra)}, which the "
            f"profile does not name; known bits: {known}")


def turned_on(is_mask: np.ndarray, value: np.ndarray, prev: np.ndarray, known_prev: np.ndarray) -> np.ndarray:
    """Per sample, the bits set now and not before (every set bit when nothing is known before); 0 elsewhere."""
    now = np.where(is_mask, value, 0).astype(np.uint64)
    before = np.where(is_mask & known_prev, np.nan_to_num(prev), 0).astype(np.uint64)
    return now & ~before
