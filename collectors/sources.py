"""Where raw samples come from: a small Source protocol, and the exposition-text source every file, scrape,
drop folder and demo node goes through. A Prometheus chunk is the other source (collectors/prometheus.py).

A source yields RawBatch objects that end on whole scrapes: every sample of one timestamp is in one batch, and
no batch holds a sample older than one given out before. The normalizer and the writer can then treat each
batch on its own; nothing downstream holds rows back. Input whose timestamps go back past a batch already
given out cannot be cut that way while streaming: it is read again as one batch (see `OutOfOrder`). Whole
scrapes hold whole histograms, so each batch is then checked against its families' # TYPE (`typed`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import Protocol

import numpy as np
import polars as pl

from collectors.exceptions import CollectorError
from normalizers import ExpositionParser, RawBatch
from normalizers.typecheck import TypeChecker

# a chunk's lines are parsed as one batch: at most this many (a normal 48 MiB chunk holds about 400,000)
MAX_LINES_PER_BATCH = 1 << 19
SCAN_BYTES = 1 << 22
Chunks = Iterable[bytes | memoryview] | Callable[[], Iterable[bytes | memoryview]]


class OutOfOrder(CollectorError):
    """A sample older than (or as old as) a batch already given out: the batches so far are not whole scrapes.

    `whole` is the same input read again as one batch, or None when it cannot be read again.
    """

    def __init__(self, message: str, whole: Source | None = None):
        super().__init__(message)
        self.whole = whole


class Source(Protocol):
    """Raw samples of one ingest run."""

    @property
    def kind(self) -> str:
        """file, scrape, demo, prometheus: the kind recorded on the run."""
        ...

    @property
    def name(self) -> str:
        """The source recorded on the run (a path, a URL)."""
        ...

    @property
    def warnings(self) -> list[str]:
        """What the source said about itself (a Prometheus partial response), kept on the run."""
        ...

    @property
    def when_empty(self) -> str | None:
        """The warning a run of no sample at all gets, if any."""
        ...

    def batches(self, default_ts_ms: int) -> Iterator[RawBatch]:
        """The samples in batches that end on whole scrapes; `default_ts_ms` is the time of samples without one."""
        ...

    def again(self) -> bool:
        """Whether `batches` can be asked once more, from the start (to stage a run again)."""
        ...


@dataclass
class ExpositionSource:
    """Prometheus text or OpenMetrics exposition, arriving as byte chunks (a mapped file, an HTTP body)."""

    kind: str
    name: str
    chunks: Chunks
    warnings: list[str] = field(default_factory=list)
    at_once: bool = False  # every sample in one batch: for input whose timestamps go back (see OutOfOrder)

    @property
    def when_empty(self) -> str | None:
        """An empty file or body is worth a warning: it is usually the wrong file or a broken exporter."""
        return f"{self.name}: no samples (empty input, or only comments)"

    def batches(self, default_ts_ms: int) -> Iterator[RawBatch]:
        """Parse chunk by chunk; the samples of a batch's newest timestamp wait for the next chunk."""
        pieces = self.chunks() if callable(self.chunks) else self.chunks
        parser = ExpositionParser()
        parsed = (parser.feed(data) for data in line_bounded(pieces))
        if self.at_once:
            return typed(one_batch(parsed, parser.finish))
        return self._checked(typed(whole_scrapes(parsed, parser.finish, default_ts_ms)))

    def _checked(self, batches: Iterator[RawBatch]) -> Iterator[RawBatch]:
        try:
            yield from batches
        except OutOfOrder as exc:
            whole = replace(self, at_once=True) if self.again() else None
            why = "" if whole else "; it cannot be read again to take it in as one batch"
            raise OutOfOrder(f"{self.name}: {exc}{why}", whole) from None

    def again(self) -> bool:
        """A function or a list of chunks can be read again; a one-shot iterator cannot."""
        return callable(self.chunks) or iter(self.chunks) is not self.chunks


def line_bounded(pieces: Iterable[bytes | memoryview], max_lines: int = MAX_LINES_PER_BATCH
                 ) -> Iterator[bytes | memoryview]:
    """The chunks, each cut into pieces of at most `max_lines` lines: a batch's memory follows its lines, not its
    bytes, and a chunk of very short lines (a compressed file of one bad byte per line) would otherwise make
    millions of rows at once."""
    for data in pieces:
        if isinstance(data, bytes) and data.count(b"\n") <= max_lines:  # the usual chunk: one quick count
            yield data
            continue
        view = memoryview(data).cast("B")
        start, count, at = 0, 0, 0
        while at < len(view):  # newlines found a window at a time: never one offset per line of a whole chunk
            window = np.frombuffer(view[at:at + SCAN_BYTES], dtype=np.uint8)
            ends = np.flatnonzero(window == 10)
            while count + len(ends) >= max_lines:
                cut = at + int(ends[max_lines - count - 1]) + 1
                yield view[start:cut]
                ends = ends[max_lines - count:]
                start, count = cut, 0
            count += len(ends)
            at += len(window)
        if start == 0:
            yield data
        elif start < len(view):
            yield view[start:]


def whole_scrapes(batches: Iterable[RawBatch], finish: Callable[[], RawBatch], default_ts_ms: int
                  ) -> Iterator[RawBatch]:
    """Re-cut parsed batches so that each ends on a whole scrape.

    A chunk boundary can fall inside a scrape; the rows of each batch's newest timestamp (samples without one
    take `default_ts_ms`) are held and go out with the next batch. Rejects go out at once.
    Raises OutOfOrder when a sample is no newer than one already given out: its scrape may be split.
    """
    held: pl.DataFrame | None = None
    series: dict[str, tuple[str, dict[str, str]]] = {}
    newest: int | None = None  # the newest timestamp given out so far
    for batch in batches:
        series = batch.series or series  # the parser's table of series grows; an empty batch may not carry it
        if not batch.samples.height:  # a chunk that completed no sample line: the held rows still wait
            yield replace(batch, series=series)
            continue
        _in_order(batch.samples, newest, default_ts_ms)
        samples = batch.samples if held is None else pl.concat([held, batch.samples])
        ts = samples.get_column("ts_ms").fill_null(default_ts_ms)
        late = ts == ts.max()
        held, samples = samples.filter(late), samples.filter(~late)
        if samples.height:
            top = ts.filter(~late).max()
            assert isinstance(top, int)
            newest = top if newest is None else max(newest, top)
        yield replace(batch, samples=samples, series=series)
    last = finish()
    _in_order(last.samples, newest, default_ts_ms)
    samples = last.samples if held is None else pl.concat([held, last.samples])
    yield replace(last, samples=samples, series=last.series or series)


def typed(batches: Iterable[RawBatch]) -> Iterator[RawBatch]:
    """Batches of whole scrapes with the values their # TYPE does not allow moved to the rejects."""
    checker = TypeChecker()
    return (checker.check(batch) for batch in batches)


def _in_order(samples: pl.DataFrame, newest: int | None, default_ts_ms: int) -> None:
    """Raise OutOfOrder when a sample is no newer than the newest one given out."""
    if newest is None or not samples.height:
        return
    oldest = samples.get_column("ts_ms").fill_null(default_ts_ms).min()
    if isinstance(oldest, int) and oldest <= newest:
        raise OutOfOrder(f"timestamps go back in time (a sample at {oldest} ms after one at {newest} ms)")


def one_batch(batches: Iterable[RawBatch], finish: Callable[[], RawBatch]) -> Iterator[RawBatch]:
    """Every sample in one final batch (rejects still go out at once)."""
    held: list[pl.DataFrame] = []
    series: dict[str, tuple[str, dict[str, str]]] = {}
    for batch in batches:
        if batch.samples.height:
            held.append(batch.samples)
        series = batch.series or series
        yield replace(batch, samples=batch.samples.clear(), series=series)
    last = finish()
    yield replace(last, samples=pl.concat([*held, last.samples]), series=last.series or series)
