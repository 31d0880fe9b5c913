"""Source -> normalizers -> store: one ingest run per file or scrape, everything read accounted for.

A run is staged while its source is read (no database lock held), then committed in one short transaction: a
failure anywhere (a bad chunk, a full disk, an injected fault) leaves the store as it was. The stored state of
sticky error codes is read in short reads while staging; the commit checks that it did not change meanwhile,
and stages the run again when it did.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

import duckdb
import polars as pl

from canonical.rejectlog import bounded_reason
from canonical.timebounds import max_age_ms
from collectors.exceptions import CollectorError
from collectors.scrape import check_url, scrape, url_host
from collectors.sources import Chunks, ExpositionSource, OutOfOrder, Source
from normalizers import (
    Context,
    Normalized,
    Normalizer,
    NormalizerError,
    Options,
    ProfileSet,
    RawBatch,
    load_profiles,
)
from normalizers.canonical_in import CanonicalNormalizer
from store import Access, IngestCounts, IngestRun, commit_run, latest_registry
from store.error_state import prior_error_state
from store.ingest import Hook as WriteHook
from store.ingest import StaleStage

Clock = Callable[[], float]  # seconds since the epoch
Hook = Callable[[int], None]  # called with the batch number after each batch is staged
RESTAGES = 3  # commits refused because stored error state changed under the staging, before giving up
_STATE_KEYS = ["node", "device", "source"]


@dataclass(frozen=True)
class IngestOptions:
    """What the user chose: a pool and a profile to force, extra profile folders, a node, a time."""

    pool: str | None = None
    profile: str | None = None
    profiles_dirs: tuple[Path, ...] = ()
    node: str | None = None
    at_ms: int | None = None  # timestamp for samples without one (default: the ingest time)
    canonical: bool = False  # feed names and labels (normalizers.canonical_in), no vendor profile


def clock_options(default_ts_ms: int, now_ms: int, env: Mapping[str, str] = os.environ) -> Options:
    """The normalizer's clock inputs, with the oldest accepted sample from $HETPOOL_MAX_SAMPLE_AGE_DAYS."""
    try:
        return Options(default_ts_ms=default_ts_ms, now_ms=now_ms, max_age_ms=max_age_ms(env))
    except ValueError as exc:
        raise CollectorError(str(exc)) from None


@dataclass
class IngestReport:
    """The outcome of one run, for printing."""

    source: str
    run_id: int
    counts: IngestCounts
    reasons: Counter[str] = field(default_factory=Counter)
    warnings: list[str] = field(default_factory=list)
    rows: int = 0  # canonical rows stored, which a derived row can make fewer than stored records
    folded: int = 0  # of counts.duplicates, the reads folded as repeats (a sticky code at 0): not duplicate rows

    def as_dict(self) -> dict[str, int]:
        """read, stored, rejected, duplicates, ignored."""
        return self.counts.as_dict()

    def written(self, run: IngestRun) -> IngestReport:
        """Take the run's id, final counts and warnings once it is committed."""
        self.run_id, self.counts, self.warnings, self.rows = run.run_id, run.counts, list(run.warnings), run.rows_stored
        self.folded = run.folded
        return self


def make_context(store: Access, options: IngestOptions, profiles: ProfileSet | None = None) -> Context:
    """Profiles, forced profile and pool checked against what exists, before any run starts."""
    if options.canonical:
        return canonical_context(store, options)
    profiles = profiles or load_profiles(options.profiles_dirs)
    forced = profiles.get(options.profile) if options.profile else None
    with store.read() as con:
        snap = latest_registry(con)
    pools = snap.registry.pools if snap else ()
    if options.pool is not None and snap is not None and options.pool not in {p.id for p in pools}:
        known = ", ".join(p.id for p in pools)
        raise NormalizerError(f"unknown pool '{options.pool}'; known: {known}")
    if options.pool is None and snap is None:
        raise NormalizerError("no registry loaded, so samples cannot be placed in pools; run "
                              "'hetpool registry load examples/fleet.yaml' or pass --pool")
    return Context(profiles, forced, pools, options.pool, options.node)


def canonical_context(store: Access, options: IngestOptions) -> Context:
    """The context of canonical input: the registry's pools, which every series' pool label must name."""
    chosen = [flag for flag, value in (("--pool", options.pool), ("--profile", options.profile),
                                        ("--profiles-dir", options.profiles_dirs)) if value]
    if chosen:
        raise NormalizerError(f"canonical input names its pool in each series and needs no profile; "
                              f"{' and '.join(chosen)} {'does' if len(chosen) == 1 else 'do'} not apply with "
                              f"--canonical")
    with store.read() as con:
        snap = latest_registry(con)
    if snap is None:
        raise NormalizerError("no registry loaded, so the pool labels of canonical series cannot be checked; run "
                              "'hetpool registry load examples/fleet.yaml' first")
    reg = snap.registry
    return Context(ProfileSet({}), None, reg.pools, None, None, {p.id: reg.chip_of(p).vendor for p in reg.pools})


def new_normalizer(ctx: Context, options: IngestOptions, clock: Options) -> Normalizer:
    """The normalizer of a run: the vendor profiles', or the canonical one for --canonical input."""
    return CanonicalNormalizer(ctx, clock) if options.canonical else Normalizer(ctx, clock)


class StatePrior:
    """The normalizer's lookup of earlier error state: the store (a short read) and this run's staged points.

    What the store answered is asked again inside the commit (`check`); a different answer means another
    writer stored state of the same series meanwhile, and the run is staged again.
    """

    def __init__(self, store: Access, run: IngestRun):
        self.store = store
        self.run = run
        self.asked: list[tuple[pl.DataFrame, pl.DataFrame]] = []

    def __call__(self, keys: pl.DataFrame) -> pl.DataFrame:
        """(node, device, source, before) -> (node, device, source, value), the newest value before `before`."""
        keys = keys.select(*_STATE_KEYS, pl.col("before").cast(pl.Int64))
        with self.store.read() as con:
            stored = prior_error_state(con, keys)
        self.asked.append((keys, stored))
        staged = self.run.staged_state()
        both = stored.with_columns(pl.lit(0, pl.Int8).alias("mine"))
        if staged is not None:
            mine = keys.join(staged.unique([*_STATE_KEYS, "ts"], keep="first", maintain_order=True),
                             on=_STATE_KEYS, how="inner").filter(pl.col("ts") < pl.col("before"))
            both = pl.concat([both, mine.select(*both.columns[:-1], pl.lit(1, pl.Int8).alias("mine"))])
        # the newest point wins; on a tie the stored one, as the commit keeps a point already stored
        newest = both.sort(["ts", "mine"], descending=[False, True]).group_by(
            [*_STATE_KEYS, "before"], maintain_order=True).last()
        return newest.select(*_STATE_KEYS, "value")

    def check(self, con: duckdb.DuckDBPyConnection, run: IngestRun) -> None:
        """Inside the commit: refuse it when a stored answer changed since staging."""
        for keys, answer in self.asked:
            if not prior_error_state(con, keys).equals(answer):
                raise StaleStage(f"error state of {run.source!r} changed while it was staged")


class BatchWriter:
    """Stages normalized batches into a run.

    Each batch holds whole scrapes and its rows are unique on the natural key, so the store skips its own
    deduplication of the batch; consecutive batches of a time-ordered source never share a timestamp, so
    their inserts never need a search of stored rows either.
    """

    def __init__(self, run: IngestRun, report: IngestReport):
        self.run = run
        self.report = report

    def raw(self, batch: RawBatch) -> None:
        self.run.add_read(batch.reads)
        self._rejects(batch.rejects, batch.unkept)

    def _rejects(self, rejects: pl.DataFrame, unkept: Mapping[str, int] | None = None) -> None:
        if rejects.height or unkept:
            self.run.add_rejects(rejects, unkept)
            counts = rejects.group_by("reason").len().iter_rows() if rejects.height else ()
            for reason, n in (*counts, *(unkept or {}).items()):
                self.report.reasons[bounded_reason(self.report.reasons, reason)] += n

    def normalized(self, out: Normalized) -> None:
        self._rejects(out.rejects)
        self.run.add_duplicates(out.folded)
        self.run.add_ignored(out.ignored)
        self.run.add_error_state(out.state)
        self.run.add_versions(out.versions)
        self.run.add_samples(out.samples, assume_unique=True)


def ingest(store: Access, source: Source, *, options: IngestOptions, clock: Clock = time.time,
           context: Context | None = None, normalizer: Normalizer | None = None, hooks: Iterable[WriteHook] = (),
           after_batch: Hook | None = None) -> IngestReport:
    """The one ingest path: stage a source's batches through the normalizer, then commit them as one run.

    `hooks` run inside the commit's transaction (a watermark). `normalizer` may be shared by the runs of one
    pull, so series are resolved once. A commit refused because stored error state changed meanwhile is
    staged again from the source, when the source can be read again; so is a source whose timestamps go back
    past a batch already staged, then as one batch.
    """
    ctx = context or make_context(store, options)
    now_ms = int(clock() * 1000)
    default_ts = options.at_ms if options.at_ms is not None else now_ms
    normalizer = normalizer or new_normalizer(ctx, options, clock_options(default_ts, now_ms))
    mark = normalizer.mark()
    with store.writing(f"hetpool {source.kind} ingest of {source.name}"):
        for attempt in range(1, RESTAGES + 1):
            try:
                run, report = _stage(store, source, normalizer, default_ts, after_batch)
            except OutOfOrder as exc:
                if exc.whole is None:
                    raise
                normalizer.reset(mark)
                source = exc.whole
                run, report = _stage(store, source, normalizer, default_ts, after_batch)
            for hook in hooks:
                run.also(hook)
            try:
                commit_run(store, run)
            except StaleStage:
                if attempt == RESTAGES or not source.again():
                    raise
                normalizer.reset(mark)
                continue
            return report.written(run)
    raise AssertionError("unreachable")


def _stage(store: Access, source: Source, normalizer: Normalizer, default_ts: int, after_batch: Hook | None
           ) -> tuple[IngestRun, IngestReport]:
    run = IngestRun(source.kind, source.name)
    report = IngestReport(source.name, 0, run.counts)
    writer = BatchWriter(run, report)
    prior = StatePrior(store, run)
    for n, batch in enumerate(source.batches(default_ts), start=1):
        writer.raw(batch)
        if batch.samples.height:
            writer.normalized(normalizer.normalize(batch, prior))
        if after_batch is not None:
            after_batch(n)
    for warning in source.warnings:
        run.warn(warning)
    if run.staged.read == 0 and source.when_empty:
        run.warn(source.when_empty)
    run.check(prior.check)
    return run, report


def ingest_exposition(store: Access, chunks: Chunks, *, kind: str, source: str, options: IngestOptions,
                      clock: Clock = time.time, context: Context | None = None,
                      after_batch: Hook | None = None) -> IngestReport:
    """Exposition text arriving as byte chunks, or a function returning them (then a run can be staged again)."""
    return ingest(store, ExpositionSource(kind, source, chunks), options=options, clock=clock, context=context,
                  after_batch=after_batch)


def with_node(options: IngestOptions, node: str | None) -> IngestOptions:
    """The options with a default node when none was chosen."""
    return options if options.node is not None or node is None else replace(options, node=node)


def ingest_scrapes(store: Access, url: str, options: IngestOptions, *, count: int = 1,
                   every_s: float = 15.0, clock: Clock = time.time, sleep: Callable[[float], None] = time.sleep,
                   fetch: Callable[[str], Iterable[bytes]] | None = None,
                   on_report: Callable[[IngestReport], None] | None = None) -> list[IngestReport]:
    """Scrape `url` `count` times, `every_s` apart; each scrape is its own run, stamped with its time.

    Samples without a node label are placed on the URL's host unless --node says otherwise. The body is
    fetched before the run is staged and kept until it commits, so no lock is held while the target answers.
    """
    fetch = fetch or scrape
    options = with_node(options, url_host(check_url(url)))
    ctx = make_context(store, options)
    reports = []
    start = clock()
    with store.writing(f"hetpool scrape of {url}"):
        for i in range(count):
            wait = start + i * every_s - clock()
            if i and wait > 0:
                sleep(wait)
            body = list(fetch(url))
            report = ingest_exposition(store, body, kind="scrape", source=url, options=options, clock=clock,
                                       context=ctx)
            reports.append(report)
            if on_report is not None:
                on_report(report)
    return reports
