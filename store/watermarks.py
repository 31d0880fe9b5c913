"""Per (source URL, profile) coverage of incremental pulls: one contiguous stretch (covered_from, watermark]."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import duckdb

from store.db import fetch_one


@dataclass(frozen=True)
class Coverage:
    """Everything in (covered_from, watermark] is stored for this source and profile."""

    covered_from: int
    watermark: int


def get_coverage(con: duckdb.DuckDBPyConnection, url: str, profile: str) -> Coverage | None:
    """The stored stretch, or None before the first pull."""
    row = fetch_one(con, "SELECT covered_from, watermark FROM collector_watermarks WHERE url = ? AND profile = ?",
                    [url, profile])
    return Coverage(int(row[0]), int(row[1])) if row else None


def extend_coverage(con: duckdb.DuckDBPyConnection, url: str, profile: str, lo: int, hi: int) -> bool:
    """Add the stored window (lo, hi] when it touches the stretch (or starts one); call inside the
    transaction that stored the data. Returns False for a window beyond a gap, which is not recorded."""
    cov = get_coverage(con, url, profile)
    if cov is not None and (lo > cov.watermark or hi < cov.covered_from):
        return False
    new = Coverage(lo, hi) if cov is None else Coverage(min(lo, cov.covered_from), max(hi, cov.watermark))
    con.execute(
        "INSERT INTO collector_watermarks (url, profile, watermark, updated_at, covered_from) VALUES (?, ?, ?, ?, ?) "
        "ON CONFLICT (url, profile) DO UPDATE SET watermark = excluded.watermark, "
        "covered_from = excluded.covered_from, updated_at = excluded.updated_at",
        [url, profile, new.watermark, dt.datetime.now(dt.UTC), new.covered_from])
    return True
