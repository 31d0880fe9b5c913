"""Per (source URL, profile) high-water marks of incremental pulls."""

from __future__ import annotations

import datetime as dt

import duckdb

from store.db import fetch_one


def get_watermark(con: duckdb.DuckDBPyConnection, url: str, profile: str) -> int | None:
    """Epoch ms up to which everything of this source and profile is stored, or None."""
    row = fetch_one(con, "SELECT watermark FROM collector_watermarks WHERE url = ? AND profile = ?", [url, profile])
    return int(row[0]) if row else None


def set_watermark(con: duckdb.DuckDBPyConnection, url: str, profile: str, watermark_ms: int) -> None:
    """Move the mark forward (never back); call inside the transaction that stored the data."""
    con.execute(
        "INSERT INTO collector_watermarks VALUES (?, ?, ?, ?) ON CONFLICT (url, profile) DO UPDATE SET "
        "watermark = greatest(collector_watermarks.watermark, excluded.watermark), updated_at = excluded.updated_at",
        [url, profile, watermark_ms, dt.datetime.now(dt.UTC)])
