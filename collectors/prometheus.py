"""Incremental pulls from a Prometheus-API store, chunked by time and metric, normalized like file ingest.

Each (profile, time chunk) is one ingest run: its samples and the profile's watermark commit together, so a
pull killed at any moment restarts from the last committed chunk and ends with the rows of a clean pull. A
canonical pull (`PullOptions.canonical`) reads the feed names instead, through the canonical normalizer, one
point per step, under one watermark of its own (CANONICAL_KEY), chunk by chunk the same way.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from urllib.parse import urlparse

import duckdb
import polars as pl

from canonical.feednames import ERROR_STATE, ERRORS_SAMPLE, VERSION_SAMPLE, canonical_of
from canonical.prometheus import SAMPLE_SUFFIXES
from canonical.schemas import REJECT_SCHEMA
from canonical.timeunits import HOUR_MS
from collectors.exceptions import CollectorError
from collectors.pipeline import IngestOptions, IngestReport, clock_options, ingest, make_context
from collectors.promhttp import ChunkFailed, PromClient, PromUnavailable
from collectors.promjson import RangeVector
from normalizers import Normalizer, Profile, RawBatch
from normalizers.canonical_in import CanonicalNormalizer
from store import Access, IngestRun, commit_run
from store.watermarks import Coverage, extend_coverage, get_coverage

# the watermark key of a canonical pull, beside the profiles' (no profile name has parentheses)
CANONICAL_KEY = "(canonical)"
MAX_POINTS_PER_SERIES = 11_000  # Prometheus refuses range queries with more points per series
FETCHERS = 2  # chunks fetched ahead in parallel: Prometheus encodes each query on one core


@dataclass(frozen=True)
class PullOptions:
    """What to pull: window (explicit or since the watermark), step, chunk length, profiles."""

    url: str
    profiles: tuple[str, ...] = ()        # empty: every profile that knows a metric on the server
    start_ms: int | None = None           # explicit window start (exclusive); overrides the watermark
    end_ms: int | None = None             # explicit window end (inclusive); default now - one step
    since_ms: int = HOUR_MS                 # first pull without a watermark goes this far back
    step_ms: int = 15_000                 # the scrape interval the data was collected at
    chunk_ms: int = HOUR_MS                 # at most this much time per query
    profiles_dirs: tuple[Path, ...] = ()
    pool: str | None = None
    canonical: bool = False  # feed names and labels, one point per step (a range query), no profile


@dataclass
class PullReport:
    """Per profile: the ingest runs written and the chunks that could not be fetched."""

    reports: list[IngestReport] = field(default_factory=list)
    missing: list[tuple[str, int, int]] = field(default_factory=list)  # (profile, start exclusive, end)
    watermarks: dict[str, int] = field(default_factory=dict)

    def totals(self) -> dict[str, int]:
        """Summed counts of every run."""
        keys = ("read", "stored", "rejected", "duplicates", "ignored")
        return {k: sum(r.as_dict()[k] for r in self.reports) for k in keys}


def source_key(url: str) -> str:
    """The URL as stored in the database: no trailing slash, and credentials refused outright."""
    parsed = urlparse(url)
    if parsed.username or parsed.password:
        raise PromUnavailable("credentials in the URL are not accepted; set HETPOOL_PROM_TOKEN or "
                              "HETPOOL_PROM_USER and HETPOOL_PROM_PASSWORD instead")
    return url.rstrip("/")


def chunks(start_ms: int, end_ms: int, step_ms: int, chunk_ms: int) -> Iterator[tuple[int, int]]:
    """(lo, hi] windows covering (start, end], none longer than the chunk or 11,000 steps."""
    width = max(step_ms, min(chunk_ms, MAX_POINTS_PER_SERIES * step_ms))
    lo = start_ms
    while lo < end_ms:
        hi = min(end_ms, lo - lo % width + width)  # aligned edges: the same chunks whatever the start
        yield lo, hi
        lo = hi


def known_names(profile: Profile, server_names: list[str]) -> list[str]:
    """Server metric names the profile maps, including histogram parts and counter suffixes."""
    names = profile.names()
    out = []
    for name in server_names:
        base = next((name[: -len(p)] for p in SAMPLE_SUFFIXES if name.endswith(p) and name[: -len(p)] in names),
                    None)
        if name in names or base is not None:
            out.append(name)
    return sorted(out)


def canonical_names(server_names: list[str]) -> list[str]:
    """Server metric names that are canonical feed names: metrics, histogram parts, errors, states, versions."""
    own = {ERRORS_SAMPLE, ERROR_STATE, VERSION_SAMPLE}
    return sorted(n for n in server_names if n in own or canonical_of(n) is not None)


def to_batch(vectors: list[RangeVector], *, node_from_instance: bool = True) -> RawBatch:
    """Raw samples of one chunk: one key per series, samples numbered for rejects.

    Series without a node label take the host of their `instance` unless `node_from_instance` is False (canonical
    series name their node, and one without it is a reject).
    """
    series: dict[str, tuple[str, dict[str, str]]] = {}
    frames = []
    for vector in vectors:
        keys = []
        for raw in vector.labels:
            labels = dict(raw)
            name = labels.pop("__name__", "")
            # exporters without a node label (npu-exporter, vLLM) are placed by the scrape target's host
            if node_from_instance and "node" not in labels and "instance" in labels:
                labels["node"] = labels["instance"].rsplit(":", 1)[0]
            key = f"{name}{sorted(labels.items())}"
            series[key] = (name, labels)
            keys.append(key)
        if vector.points.height:
            column = pl.Series("key", keys, dtype=pl.String).gather(vector.points.get_column("series"))
            frames.append(vector.points.select("value", "ts_ms").with_columns(column))
    points = pl.concat(frames) if frames else pl.DataFrame(schema={"key": pl.String, "value": pl.Float64,
                                                                   "ts_ms": pl.Int64})
    samples = points.select(
        pl.int_range(1, pl.len() + 1, dtype=pl.Int64).alias("line"), pl.col("key").cast(pl.Categorical),
        "value", "ts_ms", pl.lit(None, dtype=pl.String).alias("text"))
    return RawBatch(samples, series, pl.DataFrame(schema=REJECT_SCHEMA))


def pull(store: Access, client: PromClient, options: PullOptions, *,
         clock: Callable[[], float] = time.time, on_chunk: Callable[[str, int, int], None] | None = None,
         stop: Callable[[], bool] | None = None) -> PullReport:
    """Pull every enabled profile's series chunk by chunk; a failed chunk is reported, never skipped silently.

    Each chunk is fetched and staged with no lock held, then committed with its watermark in one transaction.
    `stop` is asked between chunks: a stopping service leaves the rest for the next pull from the watermark.
    """
    url = source_key(options.url)
    client.check()
    base = IngestOptions(pool=options.pool, profiles_dirs=options.profiles_dirs, canonical=options.canonical)
    ctx = make_context(store, base)
    server_names = client.metric_names()
    now_ms = int(clock() * 1000)
    end = options.end_ms if options.end_ms is not None else now_ms - now_ms % options.step_ms - options.step_ms
    report = PullReport()
    stopping = stop or (lambda: False)
    if options.canonical:
        names = canonical_names(server_names)
        if not names:
            raise CollectorError(f"no canonical series on {url}: none of its metric names is a feed name "
                                 f"(canonical/feednames.py); pull vendor series without --canonical")
        with store.writing(f"hetpool canonical pull from {url}"):
            _pull_series(store, client, options, CANONICAL_KEY, names, CanonicalNormalizer(ctx, clock_options(
                now_ms, now_ms)), url, end, report, on_chunk, stopping)
        return report
    wanted = [ctx.profiles.get(n) for n in options.profiles] if options.profiles else [
        p for p in ctx.profiles.profiles.values() if known_names(p, server_names)]
    if not wanted:
        raise CollectorError(f"no metric on {url} is known to any profile; known profiles: "
                             f"{', '.join(sorted(ctx.profiles.profiles))}")
    with store.writing(f"hetpool pull from {url}"):
        for profile in wanted:
            # read each pulled series with the profile it was asked for; one normalizer keeps series resolved
            normalizer = Normalizer(replace(ctx, profile=profile), clock_options(now_ms, now_ms))
            _pull_series(store, client, options, profile.name, known_names(profile, server_names), normalizer, url,
                         end, report, on_chunk, stopping)
    return report


def _pull_series(store: Access, client: PromClient, options: PullOptions, key: str, names: list[str],
                 normalizer: Normalizer, url: str, end: int, report: PullReport,
                 on_chunk: Callable[[str, int, int], None] | None, stop: Callable[[], bool]) -> None:
    """The chunks of one watermark key (a profile, or the canonical pull) from its watermark up to `end`."""
    start = _start(_coverage(store, url, key), options, end)
    canonical = options.canonical
    windows = chunks(start, end, options.step_ms, options.chunk_ms)
    for (lo, hi), fetched in _prefetched(client, names, windows, options.step_ms if canonical else None):
        if stop():
            break
        try:
            vectors = fetched.result()
        except ChunkFailed as exc:
            report.missing.append((key, lo, hi))
            _record_failure(store, url, key, lo, hi, str(exc))
            continue
        # coverage only grows over contiguous stored data: never past a missing chunk
        advance = not any(m[0] == key for m in report.missing)
        report.reports.append(_store_chunk(store, url, key, vectors, normalizer, lo, hi, advance=advance,
                                           canonical=canonical))
        if on_chunk is not None:
            on_chunk(key, lo, hi)
    cov = _coverage(store, url, key)
    report.watermarks[key] = cov.watermark if cov else start


def _coverage(store: Access, url: str, profile: str) -> Coverage | None:
    with store.read() as con:
        return get_coverage(con, url, profile)


def _start(cov: Coverage | None, options: PullOptions, end: int) -> int:
    """Where a profile's pull begins: the watermark, unless an explicit window lies outside the coverage."""
    if options.start_ms is None:
        return cov.watermark if cov is not None else end - options.since_ms
    if cov is not None and cov.covered_from <= options.start_ms < cov.watermark:
        return min(cov.watermark, end)  # an interrupted run of the same window resumes where it stopped
    return options.start_ms


def stepped(name: str, step_ms: int) -> str:
    """The query of one canonical name at one point per step.

    A 0/1 error state is its maximum over the step, so a state that rises and falls between two steps is seen
    at the step after it (and its label set keeps its name); every other series is its newest sample.
    """
    selector = f'{{__name__="{name}"}}'
    if name != ERROR_STATE:
        return selector
    return f'label_replace(max_over_time({selector}[{step_ms}ms]), "__name__", "{name}", "", "")'


def _prefetched(client: PromClient, names: list[str], windows: Iterator[tuple[int, int]], step_ms: int | None = None
                ) -> Iterator[tuple[tuple[int, int], Future[list[RangeVector]]]]:
    """Each window with its fetch already under way, the next one started before this one is stored.

    Waiting on Prometheus then overlaps with normalizing and storing the previous chunk. With `step_ms`, one
    point per step (a range query) instead of every raw sample.
    """
    def fetch(lo: int, hi: int) -> list[RangeVector]:
        if step_ms is not None:
            return [client.step_vector(stepped(n, step_ms), lo, hi, step_ms) for n in names]
        return [client.range_vector(f'{{__name__="{n}"}}', lo, hi) for n in names]

    with ThreadPoolExecutor(max_workers=FETCHERS, thread_name_prefix="prom-fetch") as pool:
        ahead: deque[tuple[tuple[int, int], Future[list[RangeVector]]]] = deque()
        for window in windows:
            ahead.append((window, pool.submit(fetch, *window)))
            if len(ahead) > FETCHERS:
                yield ahead.popleft()
        while ahead:
            yield ahead.popleft()


@dataclass
class PromChunk:
    """One (profile, time chunk) of a pull: a Source of exactly one batch, which holds whole scrapes."""

    kind: str
    name: str
    vectors: list[RangeVector]
    when_empty: str | None = None  # an empty chunk is normal: nothing was scraped then
    node_from_instance: bool = True  # False for canonical series, which name their node

    @property
    def warnings(self) -> list[str]:
        """Partial responses Prometheus reported for the chunk's queries."""
        return [f"prometheus warning: {w}" for vector in self.vectors for w in vector.warnings]

    def batches(self, default_ts_ms: int) -> Iterator[RawBatch]:
        """The chunk's raw samples (each Prometheus sample carries its own timestamp)."""
        yield to_batch(self.vectors, node_from_instance=self.node_from_instance)

    def again(self) -> bool:
        """The vectors are kept until the chunk commits."""
        return True


def _store_chunk(store: Access, url: str, profile: str, vectors: list[RangeVector], normalizer: Normalizer,
                 lo: int, hi: int, *, advance: bool, canonical: bool = False) -> IngestReport:
    hooks = [lambda con, _run: _extend(con, url, profile, lo, hi)] if advance else []
    chunk = PromChunk("prometheus", f"{url} {profile}", vectors, node_from_instance=not canonical)
    return ingest(store, chunk, options=IngestOptions(canonical=canonical), context=normalizer.ctx,
                  normalizer=normalizer, hooks=hooks)


def _extend(con: duckdb.DuckDBPyConnection, url: str, profile: str, lo: int, hi: int) -> None:
    extend_coverage(con, url, profile, lo, hi)


def _record_failure(store: Access, url: str, profile: str, lo: int, hi: int, why: str) -> None:
    """A failed chunk leaves a run row saying which window is missing and why; no data, no watermark."""
    run = IngestRun("prometheus", f"{url} {profile}")
    run.window = (lo + 1, hi)
    run.fail(f"chunk ({lo}, {hi}] missing: {why}")
    commit_run(store, run)


def follow(store: Access, client: PromClient, options: PullOptions, *,
           clock: Callable[[], float] = time.time, sleep: Callable[[float], None] = time.sleep,
           polls: int | None = None, on_pull: Callable[[PullReport], None] | None = None) -> int:
    """Pull, then keep pulling from the watermark every step; returns the number of pulls made.

    Between pulls nothing of the database is held but the writer announcement (see store.locks).
    """
    done = 0
    with store.writing(f"hetpool pull --follow from {source_key(options.url)}"):
        while polls is None or done < polls:
            report = pull(store, client, options, clock=clock)
            done += 1
            if on_pull is not None:
                on_pull(report)
            options = replace(options, start_ms=None, end_ms=None)  # later polls continue from the watermark
            if polls is None or done < polls:
                sleep(options.step_ms / 1000)
    return done
