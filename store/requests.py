"""Request traffic in the `requests` table: idempotent writes inside an ingest run, and window reads."""

from __future__ import annotations

import duckdb
import polars as pl

from store.exceptions import StoreError
from store.ingest import IngestRun

REQUEST_COLUMNS: dict[str, pl.DataType] = {
    "trace": pl.String(), "seq": pl.Int64(), "arrival_ms": pl.Int64(), "in_tokens": pl.Int32(),
    "out_tokens": pl.Int32(), "cached_tokens": pl.Int32(), "sla_tier": pl.String(), "model": pl.String(),
    "obs_pool": pl.String(), "obs_ttft_s": pl.Float64(), "obs_e2e_s": pl.Float64(), "outcome": pl.String(),
    "max_tokens": pl.Int32(), "hash_ids": pl.List(pl.Int64()), "block_tokens": pl.Int32(), "images": pl.Int32(),
    "image_tokens": pl.Int32(),
}
_COLS = ", ".join(REQUEST_COLUMNS)


def add_requests(run: IngestRun, trace: str, frame: pl.DataFrame) -> None:
    """Stage requests; the commit inserts those whose (trace, seq) is new and counts the rest as duplicates."""
    if frame.height == 0:
        return
    absent = [pl.lit(None, REQUEST_COLUMNS[c]).alias(c) for c in ("hash_ids", "block_tokens") if c not in frame.columns]
    absent += [pl.lit(0, REQUEST_COLUMNS[c]).alias(c) for c in ("images", "image_tokens") if c not in frame.columns]
    try:
        batch = frame.with_columns(pl.lit(trace).alias("trace"), *absent).select(
            [pl.col(c).cast(t) for c, t in REQUEST_COLUMNS.items()])
    except pl.exceptions.PolarsError as exc:
        raise StoreError(f"requests of trace {trace!r} do not fit the requests table: {exc}") from exc
    run.widen(int(batch["arrival_ms"].min()), int(batch["arrival_ms"].max()))  # type: ignore[arg-type]
    run.also(lambda con, r: _insert_requests(con, r, batch))


def _insert_requests(con: duckdb.DuckDBPyConnection, run: IngestRun, batch: pl.DataFrame) -> None:
    unique = batch.unique(subset=["seq"], keep="first", maintain_order=True)
    con.register("_hp_requests", unique.to_arrow())
    try:
        got = con.execute(
            "SELECT count(*) FROM _hp_requests b ANTI JOIN requests r ON r.trace = b.trace AND r.seq = b.seq"
        ).fetchall()
        stored = int(got[0][0])
        con.execute(
            f"INSERT INTO requests ({_COLS}) SELECT {_COLS} FROM _hp_requests b "
            "ANTI JOIN requests r ON r.trace = b.trace AND r.seq = b.seq")
    finally:
        con.unregister("_hp_requests")
    run.note_stored(stored, batch.height - stored, stored, None)


def _where(trace: str | None, start_ms: int | None, end_ms: int | None) -> tuple[str, list[object]]:
    """The WHERE clause of a trace and arrival window, and its parameters."""
    parts = [(c, v) for c, v in (("trace = ?", trace), ("arrival_ms >= ?", start_ms), ("arrival_ms < ?", end_ms))
             if v is not None]
    return (f"WHERE {' AND '.join(c for c, _ in parts)}" if parts else ""), [v for _, v in parts]


def read_requests(con: duckdb.DuckDBPyConnection, *, trace: str | None = None, start_ms: int | None = None,
                  end_ms: int | None = None) -> pl.DataFrame:
    """Stored requests in [start_ms, end_ms), optionally of one trace, in arrival order."""
    clause, params = _where(trace, start_ms, end_ms)
    frame = con.sql(f"SELECT {_COLS} FROM requests {clause} ORDER BY arrival_ms, trace, seq", params=params).pl()
    return frame.with_columns(*(pl.col(c).cast(pl.Int64) for c in ("in_tokens", "out_tokens", "cached_tokens",
                                                                    "max_tokens", "block_tokens")),
                              *(pl.col(c).fill_null(0).cast(pl.Int64) for c in ("images", "image_tokens")),
                              pl.col("hash_ids").cast(pl.List(pl.Int64)))


HISTORY_LIMIT = 50_000


def read_history(con: duckdb.DuckDBPyConnection, *, trace: str | None = None, before_ms: int | None = None,
                 limit: int = HISTORY_LIMIT) -> pl.DataFrame:
    """What a router knew before a window: the lengths, model and tier of the last `limit` stored requests that
    completed before before_ms (arrival plus the observed e2e, when stored; else arrived before it), optionally
    of one trace, oldest first; empty when the window starts with the store (before_ms None)."""
    if before_ms is None:
        return pl.DataFrame(schema={"in_tokens": pl.Int64, "out_tokens": pl.Int64, "model": pl.String,
                                    "sla_tier": pl.String})
    clause, params = _where(trace, None, before_ms)
    frame = con.sql(f"SELECT arrival_ms, in_tokens, out_tokens, model, sla_tier FROM requests {clause} "
                    "AND arrival_ms + coalesce(obs_e2e_s, 0) * 1000 < ? "
                    "ORDER BY arrival_ms DESC, trace DESC, seq DESC LIMIT ?", params=[*params, before_ms, limit]
                    ).pl()
    return frame.reverse().select(pl.col("in_tokens").cast(pl.Int64), pl.col("out_tokens").cast(pl.Int64),
                                  "model", "sla_tier")


def count_requests(con: duckdb.DuckDBPyConnection, *, trace: str | None = None, start_ms: int | None = None,
                   end_ms: int | None = None) -> int:
    """How many stored requests read_requests would return for the same arguments."""
    clause, params = _where(trace, start_ms, end_ms)
    return int(con.execute(f"SELECT count(*) FROM requests {clause}", params).fetchall()[0][0])


def list_traces(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """One row per stored trace: request count and arrival window."""
    return con.sql(
        "SELECT trace, count(*) AS requests, min(arrival_ms) AS first_ms, max(arrival_ms) AS last_ms "
        "FROM requests GROUP BY trace ORDER BY trace").pl()
