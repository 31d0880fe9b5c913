"""The idempotent write path: a run is staged while its source is read, then written in one short transaction.

Staging needs no database: rows, rejects, versions and error-state change points gather in memory. `write`
then runs inside the caller's transaction (see `commit_run`), where stored rows are told from duplicates,
rollups are brought up to date and the run is recorded, so the write lock is held for the commit only.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass

import duckdb
import polars as pl

from canonical.redact import redact
from canonical.rejectlog import KEEP_PER_REASON, KEEP_PER_RUN, bounded_reason
from canonical.schemas import DEVICE_WIDE, KEY, RECORD_MAX_CHARS, SAMPLE_COLUMNS, SAMPLE_SCHEMA, VERSION_SCHEMA
from store.db import Access, fetch_one, transaction
from store.error_state import record_error_state
from store.exceptions import StoreError
from store.rollups import raw_horizon, refresh_rollups

_KEY_SQL = ", ".join(KEY)

Hook = Callable[[duckdb.DuckDBPyConnection, "IngestRun"], None]  # more work inside the run's transaction


@dataclass
class IngestCounts:
    """What happened to every record read: read == stored + rejected + duplicates + ignored."""

    read: int = 0
    stored: int = 0
    rejected: int = 0
    duplicates: int = 0
    ignored: int = 0  # records of metrics a profile knows and deliberately does not map

    @property
    def balanced(self) -> bool:
        """True when every record read is accounted for."""
        return self.read == self.stored + self.rejected + self.duplicates + self.ignored

    def as_dict(self) -> dict[str, int]:
        """Plain dict for printing and JSON."""
        return asdict(self)


class StaleStage(StoreError):
    """Something the staging read from the store changed before the commit: stage the run again."""


class IngestRun:
    """The samples, rejects, versions and error state of one source, staged until `write` stores them.

    Sample frames may carry an `n_src` column: how many source records a canonical row stands for (a derived
    row can fold several). Stored and duplicate counts are sums of it, so the accounting stays in source
    records whatever the mapping did.
    """

    def __init__(self, kind: str, source: str):
        self.kind = kind
        self.source = source
        self.started_at = dt.datetime.now(dt.UTC)
        self.staged = IngestCounts()  # read, rejected and folded duplicates, known while staging
        self.folded = 0  # of the duplicates, the reads the normalizer folded (no new information), not stored rows
        self.counts = IngestCounts()  # the final counts, once written
        self.warnings: list[str] = []
        self.window: tuple[int, int] | None = None
        self.failed = False
        self.run_id = 0
        self._samples: list[tuple[pl.DataFrame, bool]] = []
        self._rejects: list[pl.DataFrame] = []
        self._kept = 0  # rejects kept as examples
        self._kept_by: dict[str, int] = {}  # ... per reason, once sampling has begun
        self._unkept: Counter[str] = Counter()  # rejects counted but not kept, by reason
        self._versions: list[pl.DataFrame] = []
        self._state: list[pl.DataFrame] = []
        self._hooks: list[Hook] = []
        self._checks: list[Hook] = []
        self._reset_write()

    def _reset_write(self) -> None:
        self.rows_stored = 0
        self.stored_span: tuple[int, int] | None = None
        self._before: tuple[int, int] | None = None  # ts range stored before this run, once read
        self._before_read = False
        self._inserted: tuple[int, int] | None = None  # ts range of rows this run inserted
        self._nodes: set[str] = set()  # nodes of the rows it inserted: only their rollups change

    # -- staging ------------------------------------------------------------------------------
    def add_read(self, n: int) -> None:
        """Count source records read (samples, lines or rows, whatever the source's unit is)."""
        self.staged.read += n

    def add_duplicates(self, n: int) -> None:
        """Count records the normalizer folded as repeats before they became rows (a sticky code)."""
        self.staged.duplicates += n
        self.folded += n

    def add_ignored(self, n: int) -> None:
        """Count records of metrics the profile ignores: neither stored nor rejected."""
        self.staged.ignored += n

    def fail(self, message: str) -> None:
        """Mark the run failed (it still commits, so the failure and its reason are on record)."""
        self.failed = True
        self.warnings.append(redact(message))

    def warn(self, message: str) -> None:
        """Attach a warning (such as a Prometheus partial response) to the run; credentials are redacted."""
        self.warnings.append(redact(message))

    def widen(self, lo: int, hi: int) -> None:
        """Widen the run's recorded time window."""
        self.window = (min(lo, self.window[0]), max(hi, self.window[1])) if self.window else (lo, hi)

    def also(self, hook: Hook) -> None:
        """Run `hook(con, run)` inside the write transaction (a watermark, requests, a freshness check)."""
        self._hooks.append(hook)

    def check(self, hook: Hook) -> None:
        """Run `hook(con, run)` first thing in the write transaction, before anything of the run is written."""
        self._checks.append(hook)

    def add_samples(self, frame: pl.DataFrame, *, assume_unique: bool = False) -> None:
        """Stage canonical rows; stored and duplicates are decided at the write.

        assume_unique=True: the caller guarantees that no two rows of the frame share the natural key (the
        write then skips the in-batch deduplication, a large share of the cost of a big batch).
        """
        if frame.height == 0:
            return
        weights = frame["n_src"].cast(pl.Int64) if "n_src" in frame.columns else pl.repeat(
            1, frame.height, dtype=pl.Int64, eager=True)
        # Categorical text columns stay dictionary-encoded: half the memory while staged and inside DuckDB
        wide = frame[DEVICE_WIDE] if DEVICE_WIDE in frame.columns else pl.repeat(
            True, frame.height, dtype=pl.Boolean, eager=True).alias(DEVICE_WIDE)
        batch = frame.select([pl.col(c) if t == pl.String() and frame.schema[c] == pl.Categorical() else
                              pl.col(c).cast(t) for c, t in SAMPLE_SCHEMA.items()]).with_columns(
            weights.alias("n_src"), wide)
        if any(batch.select(SAMPLE_COLUMNS).null_count().row(0)):  # null counts are known per column: no pass
            raise StoreError(f"ingest of {self.source!r} produced a sample with a null field")
        self.widen(int(batch["ts"].min()), int(batch["ts"].max()))  # type: ignore[arg-type]
        self._samples.append((batch, assume_unique))

    def add_rejects(self, frame: pl.DataFrame, unkept: Mapping[str, int] | None = None) -> int:
        """Count rejected records, keeping them with their reason as examples up to the run's caps
        (canonical/rejectlog.py); `unkept` counts more rejects, by reason, whose examples a reader did not keep.
        Returns how many were counted."""
        n = frame.height + sum((unkept or {}).values())
        self.staged.rejected += n
        for reason, count in (unkept or {}).items():
            self._unkept[bounded_reason(self._unkept, reason)] += count
        if frame.height == 0:
            return n
        frame = frame.select(
            pl.col("line").cast(pl.Int64), pl.col("record").cast(pl.String).str.slice(0, RECORD_MAX_CHARS),
            pl.col("reason").cast(pl.String))
        counts = dict(frame.group_by("reason", maintain_order=True).len().iter_rows())  # in order of first sight
        if self._kept + frame.height > KEEP_PER_RUN or any(
                self._kept_by.get(r, 0) + c > KEEP_PER_REASON or bounded_reason(self._kept_by, r) != r
                for r, c in counts.items()):
            frame = self._sampled(frame, counts)
        else:
            for reason, count in counts.items():
                self._kept_by[reason] = self._kept_by.get(reason, 0) + count
        if frame.height:
            self._rejects.append(frame)
            self._kept += frame.height
        return n

    def _sampled(self, frame: pl.DataFrame, counts: dict[str, int]) -> pl.DataFrame:
        """The rows of `frame` that fit the caps, first come first kept; the rest counted as not kept."""
        room: dict[str, int] = {}
        for reason in counts:
            if bounded_reason(self._kept_by, reason) == reason:
                self._kept_by.setdefault(reason, 0)
                room[reason] = KEEP_PER_REASON - self._kept_by[reason]
            else:
                room[reason] = 0
        ranked = frame.with_columns(pl.int_range(pl.len()).over("reason").alias("_n"))
        fits = ranked.filter(pl.col("_n") < pl.col("reason").replace_strict(room, return_dtype=pl.Int64))
        fits = fits.head(max(0, KEEP_PER_RUN - self._kept)).drop("_n")
        kept = dict(fits.group_by("reason").len().iter_rows()) if fits.height else {}
        for reason, count in counts.items():
            k = kept.get(reason, 0)
            if reason in self._kept_by:
                self._kept_by[reason] += k
            if count > k:
                self._unkept[bounded_reason(self._unkept, reason)] += count - k
        return fits

    def sampled_note(self) -> str | None:
        """The run's warning when some rejects were counted but not kept as examples."""
        unkept = sum(self._unkept.values())
        if not unkept:
            return None
        return (f"{self.staged.rejected:,} records rejected: {self.staged.rejected - unkept:,} kept as examples in "
                f"table rejects (at most {KEEP_PER_REASON:,} per reason, {KEEP_PER_RUN:,} per run); the counts by "
                f"reason are exact")

    def add_versions(self, frame: pl.DataFrame) -> None:
        """Stage observed versions (one row per observation, or first and last seen)."""
        if frame.height:
            self._versions.append(frame.select([pl.col(c).cast(t) for c, t in VERSION_SCHEMA.items()]))

    def add_error_state(self, changes: pl.DataFrame) -> None:
        """Stage change points of stateful error series (node, device, source, ts, value)."""
        if changes.height:
            self._state.append(changes)

    def staged_state(self) -> pl.DataFrame | None:
        """Change points staged so far, or None."""
        if not self._state:
            return None
        if len(self._state) > 1:
            self._state = [pl.concat(self._state)]
        return self._state[0]

    # -- the write ----------------------------------------------------------------------------
    def write(self, con: duckdb.DuckDBPyConnection) -> IngestCounts:
        """Store everything staged, inside the caller's transaction; safe to call again after a rollback."""
        self.counts = dataclasses.replace(self.staged)
        self._reset_write()
        note = self.sampled_note()
        if note is not None and note not in self.warnings:
            self.warnings.append(note)
        for check in self._checks:
            check(con, self)
        row = fetch_one(
            con, "INSERT INTO ingest_runs (kind, source, started_at, status) VALUES (?, ?, ?, 'running') "
                 "RETURNING run_id", [self.kind, self.source, self.started_at])
        assert row is not None
        self.run_id = int(row[0])
        for rejects in self._rejects:
            self._insert_rejects(con, rejects)
        horizon = raw_horizon(con)
        for batch, unique in self._samples:
            self._insert_samples(con, batch, unique, horizon)
        state = self.staged_state()
        if state is not None:
            # a change point already written is kept, as one insert per batch would have kept the first
            record_error_state(con, state.unique(["node", "device", "source", "ts"], keep="first", maintain_order=True))
        if self._versions:
            self._upsert_versions(con, pl.concat(self._versions))
        for hook in self._hooks:
            hook(con, self)
        c = self.counts
        if not c.balanced:
            raise StoreError(f"ingest of {self.source!r} lost records: read {c.read} != stored {c.stored} + "
                             f"rejected {c.rejected} + duplicates {c.duplicates} + ignored {c.ignored}")
        if self.stored_span is not None:
            refresh_rollups(con, *self.stored_span, nodes=sorted(self._nodes))
        con.execute(
            "UPDATE ingest_runs SET finished_at = ?, window_start = ?, window_end = ?, read = ?, stored = ?, "
            "rejected = ?, duplicates = ?, ignored = ?, status = ?, warnings = ? WHERE run_id = ?",
            [dt.datetime.now(dt.UTC), *(self.window or (None, None)), c.read, c.stored, c.rejected, c.duplicates,
             c.ignored,
             "failed" if self.failed else "warnings" if self.warnings else "ok", json.dumps(self.warnings),
             self.run_id])
        return self.counts

    def note_stored(self, stored: int, duplicates: int, rows: int, span: tuple[int, int] | None) -> None:
        """Count rows a hook inserted (in source records) and the time span they cover."""
        self.counts.stored += stored
        self.counts.duplicates += duplicates
        self.rows_stored += rows
        if span is not None:
            self.stored_span = span if self.stored_span is None else (
                min(span[0], self.stored_span[0]), max(span[1], self.stored_span[1]))

    def _insert_samples(self, con: duckdb.DuckDBPyConnection, batch: pl.DataFrame, assume_unique: bool,
                        horizon: int | None) -> None:
        if horizon is not None:
            batch = self._reject_pruned(con, batch, horizon)
            if batch.height == 0:
                return
        unique = batch if assume_unique else batch.unique(subset=list(KEY), keep="first", maintain_order=True)
        offered = int(unique["n_src"].sum())
        in_batch_dupes = int(batch["n_src"].sum()) - offered
        lo, hi = int(unique["ts"].min()), int(unique["ts"].max())  # type: ignore[arg-type]
        con.register("_hp_batch", unique.to_arrow())
        try:
            overlap = self._may_overlap(con, lo, hi) and fetch_one(
                con, "SELECT count(*) FROM samples WHERE ts BETWEEN ? AND ?", [lo, hi]) != (0,)
            if overlap:
                con.execute(
                    f"CREATE OR REPLACE TEMP TABLE _hp_new AS SELECT b.* FROM _hp_batch b ANTI JOIN "
                    f"(SELECT {_KEY_SQL} FROM samples WHERE ts BETWEEN ? AND ?) s USING ({_KEY_SQL})", [lo, hi])
                source = "_hp_new"
                got = fetch_one(con, "SELECT count(*), coalesce(sum(n_src), 0), min(ts), max(ts) FROM _hp_new")
                assert got is not None
                rows, stored = int(got[0]), int(got[1])
                span = (int(got[2]), int(got[3])) if rows else None
            else:
                source, rows, stored, span = "_hp_batch", unique.height, offered, (lo, hi)
            cols = ", ".join((*SAMPLE_COLUMNS, DEVICE_WIDE))
            con.execute(f"INSERT INTO samples ({cols}) SELECT {cols} FROM {source}")
            if source == "_hp_new":
                con.execute("DROP TABLE _hp_new")
        finally:
            con.unregister("_hp_batch")
        if span is not None:
            self._inserted = span if self._inserted is None else (
                min(span[0], self._inserted[0]), max(span[1], self._inserted[1]))
            self._nodes.update(unique.get_column("node").cast(pl.String).unique().to_list())
        self.note_stored(stored, offered - stored + in_batch_dupes, rows, span)

    def _may_overlap(self, con: duckdb.DuckDBPyConnection, lo: int, hi: int) -> bool:
        """Whether stored rows may fall in [lo, hi]: only then is the store searched for rows already there.

        Rows stored before this run are known by their time range, read once; rows of this run by the range
        it inserted so far. A time-ordered file never overlaps either, so its batches need no search.
        """
        if not self._before_read:
            row = fetch_one(con, "SELECT min(ts), max(ts) FROM samples")
            self._before = (int(row[0]), int(row[1])) if row and row[0] is not None else None
            self._before_read = True
        return any(span is not None and lo <= span[1] and span[0] <= hi for span in (self._before, self._inserted))

    def _reject_pruned(self, con: duckdb.DuckDBPyConnection, batch: pl.DataFrame, horizon: int) -> pl.DataFrame:
        """Samples older than the retention horizon would never reach the rollups: reject them."""
        old = batch.filter(pl.col("ts") < horizon)
        if old.height:
            self._insert_rejects(con, old.select(
                pl.lit(None, dtype=pl.Int64).alias("line"),
                pl.format("{} {} {}@{} {}", "metric", "node", "device", "ts", "value").alias("record"),
                pl.lit(f"older than the raw retention horizon {horizon} ms (pruned by 'hetpool prune')")
                .alias("reason"),
            ))
            # a folded row stands for n_src records; all of them are rejected with it
            self.counts.rejected += int(old["n_src"].sum())
        return batch.filter(pl.col("ts") >= horizon)

    def _insert_rejects(self, con: duckdb.DuckDBPyConnection, frame: pl.DataFrame) -> None:
        rejects = frame.select(pl.lit(self.run_id, dtype=pl.Int64).alias("run_id"),
                               pl.lit(self.source).alias("source"), "line", "record", "reason")
        con.register("_hp_rejects", rejects.to_arrow())
        try:
            # a reject already on record for the same source, line, text and reason (a file ingested again) is
            # counted by this run but kept once
            con.execute("INSERT INTO rejects SELECT n.run_id, n.source, n.line, n.record, n.reason FROM _hp_rejects n "
                        "WHERE NOT EXISTS (SELECT 1 FROM rejects r WHERE r.source = n.source AND r.line IS NOT "
                        "DISTINCT FROM n.line AND r.record = n.record AND r.reason = n.reason)")
        finally:
            con.unregister("_hp_rejects")

    @staticmethod
    def _upsert_versions(con: duckdb.DuckDBPyConnection, frame: pl.DataFrame) -> None:
        agg = frame.group_by("pool", "node", "device", "component", "version").agg(
            pl.col("ts").min().alias("first_seen"), pl.col("ts").max().alias("last_seen"))
        con.register("_hp_versions", agg.to_arrow())
        try:
            con.execute(
                "INSERT INTO versions SELECT pool, node, device, component, version, first_seen, last_seen "
                "FROM _hp_versions ON CONFLICT (pool, node, device, component, version) DO UPDATE SET "
                "first_seen = least(versions.first_seen, excluded.first_seen), "
                "last_seen = greatest(versions.last_seen, excluded.last_seen)")
        finally:
            con.unregister("_hp_versions")


def commit_run(store: Access, run: IngestRun) -> IngestCounts:
    """Write a staged run in one transaction of its own: all of it, or (on any error) nothing."""
    with store.write(f"hetpool {run.kind} ingest of {run.source}") as con, transaction(con):
        return run.write(con)
