"""Source -> normalizers -> store: one ingest run per file or scrape, everything read accounted for.

The run is one transaction: a failure anywhere (a bad chunk, a full disk, an injected fault) leaves the
store as it was. Stored state of sticky error codes is read and written inside the same transaction.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path

import duckdb
import polars as pl

from collectors.scrape import check_url, scrape, url_host
from normalizers import (
    Context,
    ExpositionParser,
    Normalized,
    Normalizer,
    NormalizerError,
    Options,
    ProfileSet,
    RawBatch,
    load_profiles,
)
from store import KEY, IngestCounts, IngestRun, latest_registry
from store.error_state import prior_error_state, record_error_state

Clock = Callable[[], float]  # seconds since the epoch
STATE_ROWS = 100_000  # error-state change points held before they are written
Hook = Callable[[int], None]  # called with the batch number after each batch is written


@dataclass(frozen=True)
class IngestOptions:
    """What the user chose: a pool and a profile to force, extra profile folders, a node, a time."""

    pool: str | None = None
    profile: str | None = None
    profiles_dirs: tuple[Path, ...] = ()
    node: str | None = None
    at_ms: int | None = None  # timestamp for samples without one (default: the ingest time)


@dataclass
class IngestReport:
    """The outcome of one run, for printing."""

    source: str
    run_id: int
    counts: IngestCounts
    reasons: Counter[str] = field(default_factory=Counter)
    warnings: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, int]:
        """read, stored, rejected, duplicates."""
        return self.counts.as_dict()


def make_context(con: duckdb.DuckDBPyConnection, options: IngestOptions,
                 profiles: ProfileSet | None = None) -> Context:
    """Profiles, forced profile and pool checked against what exists, before any run starts."""
    profiles = profiles or load_profiles(options.profiles_dirs)
    forced = profiles.get(options.profile) if options.profile else None
    snap = latest_registry(con)
    pools = snap.registry.pools if snap else ()
    if options.pool is not None and snap is not None and options.pool not in {p.id for p in pools}:
        known = ", ".join(p.id for p in pools)
        raise NormalizerError(f"unknown pool '{options.pool}'; known: {known}")
    if options.pool is None and snap is None:
        raise NormalizerError("no registry loaded, so samples cannot be placed in pools; run "
                              "'hetpool registry load examples/fleet.yaml' or pass --pool")
    return Context(profiles, forced, pools, options.pool, options.node)


class BatchWriter:
    """Writes normalized batches into a run.

    Each batch's rows are unique on the natural key, so the store can skip its own deduplication. The rows
    of a batch's newest timestamp wait for the next batch: a scrape cut by a chunk boundary then lands in one
    insert, consecutive inserts of a time-ordered file never overlap in time (no anti-join against stored
    rows), and only rows at the boundary timestamp need deduplicating again. Versions are kept until the end
    and upserted once; so are change points of error series, unless a lookup of stored state (`prior`) needs
    them first or STATE_ROWS of them gather.
    """

    def __init__(self, run: IngestRun, report: IngestReport):
        self.run = run
        self.report = report
        self.pending: pl.DataFrame | None = None
        self.versions: pl.DataFrame | None = None  # first and last seen per version so far
        self.state: list[pl.DataFrame] = []  # error-state change points not written yet

    def raw(self, batch: RawBatch) -> None:
        self.run.add_read(batch.reads)
        self._rejects(batch.rejects)

    def _rejects(self, rejects: pl.DataFrame) -> None:
        if rejects.height:
            self.run.add_rejects(rejects)
            for reason, n in rejects.group_by("reason").len().iter_rows():
                self.report.reasons[reason] += n

    def normalized(self, out: Normalized) -> None:
        self._rejects(out.rejects)
        self.run.add_duplicates(out.folded)
        if out.state.height:
            self.state.append(out.state)
            if sum(s.height for s in self.state) >= STATE_ROWS:  # bounded memory when error counters move a lot
                self._write_state()
        if out.versions.height:
            seen = out.versions if self.versions is None else pl.concat([self.versions, out.versions])
            self.versions = seen.group_by("pool", "node", "device", "component", "version").agg(
                pl.col("ts").min()).vstack(seen.group_by("pool", "node", "device", "component", "version").agg(
                    pl.col("ts").max()))
        rows, edge = out.samples, None
        if self.pending is not None and self.pending.height:
            edge = self.pending.get_column("ts").first()
            rows = pl.concat([self.pending, rows])
        if rows.height == 0:
            return
        newest = rows.get_column("ts").max()
        self.pending = rows.filter(pl.col("ts") == newest)
        send = rows.filter(pl.col("ts") < newest)
        if edge is not None:  # the held rows and this batch may both hold a row for the same key there
            at_edge = send.filter(pl.col("ts") == edge)
            if at_edge.select(KEY).is_duplicated().any():
                self.run.add_samples(at_edge)
                send = send.filter(pl.col("ts") != edge)
        self.run.add_samples(send, assume_unique=True)

    def prior(self, keys: pl.DataFrame) -> pl.DataFrame:
        """Stored error state for the normalizer, including the change points of earlier batches."""
        self._write_state()
        return prior_error_state(self.run.con, keys)

    def _write_state(self) -> None:
        if self.state:
            # a change point already written is kept, as one insert per batch would have kept the first
            changes = pl.concat(self.state).unique(["node", "device", "source", "ts"], keep="first",
                                                   maintain_order=True)
            self.state = []
            record_error_state(self.run.con, changes)

    def flush(self) -> None:
        self._write_state()
        if self.pending is not None and self.pending.height:
            self.run.add_samples(self.pending)
        self.pending = None
        if self.versions is not None:
            self.run.add_versions(self.versions)
            self.versions = None


def stored_state(con: duckdb.DuckDBPyConnection) -> Callable[[pl.DataFrame], pl.DataFrame]:
    """The lookup of stored sticky-error state that the normalizer needs, bound to a connection."""
    return lambda keys: prior_error_state(con, keys)


def ingest_exposition(con: duckdb.DuckDBPyConnection, chunks: Iterable[bytes | memoryview], *, kind: str, source: str,
                      options: IngestOptions, clock: Clock = time.time, context: Context | None = None,
                      after_batch: Hook | None = None) -> IngestReport:
    """Parse, normalize and store exposition text arriving as byte chunks, as one ingest run."""
    ctx = context or make_context(con, options)
    now_ms = int(clock() * 1000)
    normalizer = Normalizer(ctx, Options(default_ts_ms=options.at_ms if options.at_ms is not None else now_ms,
                                         now_ms=now_ms))
    parser = ExpositionParser()
    with IngestRun(con, kind, source) as run:
        report = IngestReport(source, run.run_id, run.counts)
        writer = BatchWriter(run, report)
        for n, batch in enumerate(_batches(parser, chunks), start=1):
            writer.raw(batch)
            if batch.samples.height:
                writer.normalized(normalizer.normalize(batch, writer.prior, last=False))
            if after_batch is not None:
                after_batch(n)
        writer.normalized(normalizer.finish())
        writer.flush()
        if run.counts.read == 0:
            run.warn(f"{source}: no samples (empty input, or only comments)")
        report.warnings = list(run.warnings)
    return report


def _batches(parser: ExpositionParser, chunks: Iterable[bytes | memoryview]) -> Iterable[RawBatch]:
    for data in chunks:
        yield parser.feed(data)
    yield parser.finish()


def ingest_frame(con: duckdb.DuckDBPyConnection, frame: pl.DataFrame, *, kind: str, source: str,
                 options: IngestOptions, clock: Clock = time.time, context: Context | None = None,
                 ) -> IngestReport:
    """Normalize and store already-parsed raw samples (name, labels, value, ts_ms) as one ingest run."""
    ctx = context or make_context(con, options)
    now_ms = int(clock() * 1000)
    normalizer = Normalizer(ctx, Options(default_ts_ms=options.at_ms if options.at_ms is not None else now_ms,
                                         now_ms=now_ms))
    with IngestRun(con, kind, source) as run:
        report = IngestReport(source, run.run_id, run.counts)
        writer = BatchWriter(run, report)
        run.add_read(frame.height)
        if frame.height:
            writer.normalized(normalizer.normalize_frame(frame, writer.prior))
        writer.flush()
        report.warnings = list(run.warnings)
    return report


def with_node(options: IngestOptions, node: str | None) -> IngestOptions:
    """The options with a default node when none was chosen."""
    return options if options.node is not None or node is None else replace(options, node=node)


def ingest_scrapes(con: duckdb.DuckDBPyConnection, url: str, options: IngestOptions, *, count: int = 1,
                   every_s: float = 15.0, clock: Clock = time.time, sleep: Callable[[float], None] = time.sleep,
                   fetch: Callable[[str], Iterable[bytes]] | None = None,
                   on_report: Callable[[IngestReport], None] | None = None) -> list[IngestReport]:
    """Scrape `url` `count` times, `every_s` apart; each scrape is its own run, stamped with its time.

    Samples without a node label are placed on the URL's host unless --node says otherwise.
    """
    fetch = fetch or scrape
    options = with_node(options, url_host(check_url(url)))
    ctx = make_context(con, options)
    reports = []
    start = clock()
    for i in range(count):
        wait = start + i * every_s - clock()
        if i and wait > 0:
            sleep(wait)
        report = ingest_exposition(con, fetch(url), kind="scrape", source=url, options=options, clock=clock,
                                   context=ctx)
        reports.append(report)
        if on_report is not None:
            on_report(report)
    return reports
