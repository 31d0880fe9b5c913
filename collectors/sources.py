"""Where raw samples come from: a small Source protocol, and the exposition-text source every file, scrape,
drop folder and demo node goes through. A Prometheus chunk is the other source (collectors/prometheus.py).

A source yields RawBatch objects that end on whole scrapes: every sample of one timestamp is in one batch.
The normalizer and the writer can then treat each batch on its own; nothing downstream holds rows back.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Protocol

import polars as pl

from normalizers import ExpositionParser, RawBatch

Chunks = Iterable[bytes | memoryview] | Callable[[], Iterable[bytes | memoryview]]


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

    @property
    def when_empty(self) -> str | None:
        """An empty file or body is worth a warning: it is usually the wrong file or a broken exporter."""
        return f"{self.name}: no samples (empty input, or only comments)"

    def batches(self, default_ts_ms: int) -> Iterator[RawBatch]:
        """Parse chunk by chunk; the samples of a batch's newest timestamp wait for the next chunk."""
        pieces = self.chunks() if callable(self.chunks) else self.chunks
        parser = ExpositionParser()
        return whole_scrapes((parser.feed(data) for data in pieces), parser.finish, default_ts_ms)

    def again(self) -> bool:
        """A function or a list of chunks can be read again; a one-shot iterator cannot."""
        return callable(self.chunks) or iter(self.chunks) is not self.chunks


def whole_scrapes(batches: Iterable[RawBatch], finish: Callable[[], RawBatch], default_ts_ms: int
                  ) -> Iterator[RawBatch]:
    """Re-cut parsed batches so that each ends on a whole scrape.

    A chunk boundary can fall inside a scrape; the rows of each batch's newest timestamp (samples without one
    take `default_ts_ms`) are held and go out with the next batch. Rejects go out at once.
    """
    held: pl.DataFrame | None = None
    series: dict[str, tuple[str, dict[str, str]]] = {}
    for batch in batches:
        samples = batch.samples if held is None else pl.concat([held, batch.samples])
        series = batch.series or series  # the parser's table of series grows; an empty batch may not carry it
        held = None
        if samples.height:
            ts = samples.get_column("ts_ms").fill_null(default_ts_ms)
            late = ts == ts.max()
            held, samples = samples.filter(late), samples.filter(~late)
        yield RawBatch(samples, series, batch.rejects, batch.types)
    last = finish()
    samples = last.samples if held is None else pl.concat([held, last.samples])
    yield RawBatch(samples, last.series or series, last.rejects, last.types)
