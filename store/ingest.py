"""The idempotent write path: one ingest run is one transaction, and every source record is accounted for."""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import asdict, dataclass
from types import TracebackType

import duckdb
import polars as pl

from store.db import fetch_one
from store.errors import StoreError
from store.rollups import raw_horizon, refresh_rollups

SAMPLE_COLUMNS = ("ts", "pool", "node", "device", "metric", "value", "attributes")
SAMPLE_SCHEMA: dict[str, pl.DataType] = {
    "ts": pl.Int64(), "pool": pl.String(), "node": pl.String(), "device": pl.String(),
    "metric": pl.String(), "value": pl.Float64(), "attributes": pl.String(),
}
KEY = ("ts", "pool", "node", "device", "metric", "attributes")
REJECT_SCHEMA: dict[str, pl.DataType] = {"line": pl.Int64(), "record": pl.String(), "reason": pl.String()}
VERSION_SCHEMA: dict[str, pl.DataType] = {
    "pool": pl.String(), "node": pl.String(), "device": pl.String(), "component": pl.String(),
    "version": pl.String(), "ts": pl.Int64(),
}
RECORD_MAX_CHARS = 500
_KEY_SQL = ", ".join(KEY)


@dataclass
class IngestCounts:
    """What happened to every record read: read == stored + rejected + duplicates."""

    read: int = 0
    stored: int = 0
    rejected: int = 0
    duplicates: int = 0

    def as_dict(self) -> dict[str, int]:
        """Plain dict for printing and JSON."""
        return asdict(self)


class IngestRun:
    """A transaction that writes samples, rejects and versions of one source and records the run.

    Sample frames may carry an `n_src` column: how many source records a canonical row stands for
    (a derived row can fold several). Stored and duplicate counts are sums of it, so the accounting
    stays in source records whatever the mapping did.
    """

    def __init__(self, con: duckdb.DuckDBPyConnection, kind: str, source: str):
        self.con = con
        self.kind = kind
        self.source = source
        self.counts = IngestCounts()
        self.rows_stored = 0
        self.warnings: list[str] = []
        self.window: tuple[int, int] | None = None
        self.stored_span: tuple[int, int] | None = None
        self.run_id = 0
        self.failed = False
        self._open = False
        self._horizon: int | None = None
        self._before: tuple[int, int] | None = None  # ts range stored before this run, once read
        self._before_read = False
        self._inserted: tuple[int, int] | None = None  # ts range of rows this run inserted

    def __enter__(self) -> IngestRun:
        self.con.execute("BEGIN TRANSACTION")
        self._open = True
        row = fetch_one(
            self.con,
            "INSERT INTO ingest_runs (kind, source, started_at, status) VALUES (?, ?, ?, 'running') RETURNING run_id",
            [self.kind, self.source, dt.datetime.now(dt.UTC)],
        )
        assert row is not None
        self.run_id = int(row[0])
        self._horizon = raw_horizon(self.con)
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if not self._open:
            return
        self._open = False
        if exc_type is not None:
            self.con.execute("ROLLBACK")
            return
        try:
            self._check_accounting()
            if self.stored_span is not None:
                refresh_rollups(self.con, *self.stored_span)
            self.con.execute(
                "UPDATE ingest_runs SET finished_at = ?, window_start = ?, window_end = ?, read = ?, "
                "stored = ?, rejected = ?, duplicates = ?, status = ?, warnings = ? WHERE run_id = ?",
                [dt.datetime.now(dt.UTC), *(self.window or (None, None)), self.counts.read,
                 self.counts.stored, self.counts.rejected, self.counts.duplicates,
                 "failed" if self.failed else "warnings" if self.warnings else "ok", json.dumps(self.warnings),
                 self.run_id],
            )
        except BaseException:
            self.con.execute("ROLLBACK")
            raise
        self.con.execute("COMMIT")

    def _check_accounting(self) -> None:
        c = self.counts
        if c.read != c.stored + c.rejected + c.duplicates:
            raise StoreError(
                f"ingest of {self.source!r} lost records: read {c.read} != stored {c.stored} + "
                f"rejected {c.rejected} + duplicates {c.duplicates}"
            )

    # -- accounting ---------------------------------------------------------------------------
    def add_read(self, n: int) -> None:
        """Count source records read (samples, lines or rows, whatever the source's unit is)."""
        self.counts.read += n

    def add_duplicates(self, n: int) -> None:
        """Count records the normalizer folded as repeats before they became rows (a sticky code)."""
        self.counts.duplicates += n

    def fail(self, message: str) -> None:
        """Mark the run failed (it still commits, so the failure and its reason are on record)."""
        self.failed = True
        self.warnings.append(message)

    def warn(self, message: str) -> None:
        """Attach a warning (such as a Prometheus partial response) to the run."""
        self.warnings.append(message)

    # -- writes --------------------------------------------------------------------------------
    def add_samples(self, frame: pl.DataFrame, *, assume_unique: bool = False) -> tuple[int, int]:
        """Insert rows not already stored; return (stored, duplicates) in source records.

        assume_unique=True: the caller guarantees that no two rows of the frame share the natural key (it
        skips the in-batch deduplication, which is a large share of the cost of a big batch).
        """
        if frame.height == 0:
            return (0, 0)
        weights = frame["n_src"].cast(pl.Int64) if "n_src" in frame.columns else pl.repeat(
            1, frame.height, dtype=pl.Int64, eager=True)
        # Categorical text columns stay dictionary-encoded: DuckDB then holds an uncommitted run in half the memory
        batch = frame.select([pl.col(c) if t == pl.String() and frame.schema[c] == pl.Categorical() else
                              pl.col(c).cast(t) for c, t in SAMPLE_SCHEMA.items()]).with_columns(weights.alias("n_src"))
        if any(batch.select(SAMPLE_COLUMNS).null_count().row(0)):  # null counts are known per column: no pass
            raise StoreError(f"ingest of {self.source!r} produced a sample with a null field")
        if self._horizon is not None:
            batch = self._reject_pruned(batch, self._horizon)
            if batch.height == 0:
                return (0, 0)
        unique = batch if assume_unique else batch.unique(subset=list(KEY), keep="first", maintain_order=True)
        offered = int(unique["n_src"].sum())
        in_batch_dupes = int(batch["n_src"].sum()) - offered
        lo, hi = int(unique["ts"].min()), int(unique["ts"].max())  # type: ignore[arg-type]
        self.window = (min(lo, self.window[0]), max(hi, self.window[1])) if self.window else (lo, hi)
        arrow = unique.to_arrow()
        self.con.register("_hp_batch", arrow)
        try:
            overlap = self._may_overlap(lo, hi) and fetch_one(
                self.con, "SELECT count(*) FROM samples WHERE ts BETWEEN ? AND ?", [lo, hi]) != (0,)
            if overlap:
                self.con.execute(
                    f"CREATE OR REPLACE TEMP TABLE _hp_new AS SELECT b.* FROM _hp_batch b ANTI JOIN "
                    f"(SELECT {_KEY_SQL} FROM samples WHERE ts BETWEEN ? AND ?) s USING ({_KEY_SQL})",
                    [lo, hi])
                source = "_hp_new"
                got = fetch_one(self.con, "SELECT count(*), coalesce(sum(n_src), 0), min(ts), max(ts) FROM _hp_new")
                assert got is not None
                rows, stored = int(got[0]), int(got[1])
                span = (int(got[2]), int(got[3])) if rows else None
            else:
                source, rows, stored, span = "_hp_batch", unique.height, offered, (lo, hi)
            if span is not None:
                self.stored_span = span if self.stored_span is None else (
                    min(span[0], self.stored_span[0]), max(span[1], self.stored_span[1]))
                self._inserted = span if self._inserted is None else (
                    min(span[0], self._inserted[0]), max(span[1], self._inserted[1]))
            cols = ", ".join(SAMPLE_COLUMNS)
            self.con.execute(f"INSERT INTO samples ({cols}) SELECT {cols} FROM {source}")
            if source == "_hp_new":
                self.con.execute("DROP TABLE _hp_new")
        finally:
            self.con.unregister("_hp_batch")
        duplicates = offered - stored + in_batch_dupes
        self.rows_stored += rows
        self.counts.stored += stored
        self.counts.duplicates += duplicates
        return stored, duplicates

    def _may_overlap(self, lo: int, hi: int) -> bool:
        """Whether stored rows may fall in [lo, hi]: only then is the store searched for rows already there.

        Rows stored before this run are known by their time range, read once; rows of this run by the range
        it inserted so far. A time-ordered file never overlaps either, so its batches need no search.
        """
        if not self._before_read:
            row = fetch_one(self.con, "SELECT min(ts), max(ts) FROM samples")
            self._before = (int(row[0]), int(row[1])) if row and row[0] is not None else None
            self._before_read = True
        return any(span is not None and lo <= span[1] and span[0] <= hi for span in (self._before, self._inserted))

    def _reject_pruned(self, batch: pl.DataFrame, horizon: int) -> pl.DataFrame:
        """Samples older than the retention horizon would never reach the rollups: reject them."""
        old = batch.filter(pl.col("ts") < horizon)
        if old.height:
            self.add_rejects(old.select(
                pl.lit(None, dtype=pl.Int64).alias("line"),
                pl.format("{} {} {}@{} {}", "metric", "node", "device", "ts", "value").alias("record"),
                pl.lit(f"older than the raw retention horizon {horizon} ms (pruned by 'hetpool prune')")
                .alias("reason"),
            ))
            # a folded row stands for n_src records; all of them are rejected with it
            self.counts.rejected += int(old["n_src"].sum()) - old.height
        return batch.filter(pl.col("ts") >= horizon)

    def add_rejects(self, frame: pl.DataFrame) -> int:
        """Keep rejected records with their reason; returns how many."""
        if frame.height == 0:
            return 0
        rejects = frame.select(
            pl.lit(self.run_id, dtype=pl.Int64).alias("run_id"),
            pl.lit(self.source).alias("source"),
            pl.col("line").cast(pl.Int64),
            pl.col("record").cast(pl.String).str.slice(0, RECORD_MAX_CHARS),
            pl.col("reason").cast(pl.String),
        )
        self.con.register("_hp_rejects", rejects.to_arrow())
        try:
            self.con.execute("INSERT INTO rejects SELECT run_id, source, line, record, reason FROM _hp_rejects")
        finally:
            self.con.unregister("_hp_rejects")
        self.counts.rejected += rejects.height
        return rejects.height

    def add_versions(self, frame: pl.DataFrame) -> int:
        """Upsert observed versions, widening first/last seen; returns distinct versions in the frame."""
        if frame.height == 0:
            return 0
        agg = frame.select([pl.col(c).cast(t) for c, t in VERSION_SCHEMA.items()]).group_by(
            "pool", "node", "device", "component", "version").agg(
            pl.col("ts").min().alias("first_seen"), pl.col("ts").max().alias("last_seen"))
        self.con.register("_hp_versions", agg.to_arrow())
        try:
            self.con.execute(
                "INSERT INTO versions SELECT pool, node, device, component, version, first_seen, last_seen "
                "FROM _hp_versions ON CONFLICT (pool, node, device, component, version) DO UPDATE SET "
                "first_seen = least(versions.first_seen, excluded.first_seen), "
                "last_seen = greatest(versions.last_seen, excluded.last_seen)")
        finally:
            self.con.unregister("_hp_versions")
        return agg.height
