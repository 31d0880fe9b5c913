"""Samples whose value their family's # TYPE does not allow become rejects, vectorized per batch.

`TypeChecker.check` takes a batch of whole scrapes (collectors.sources cuts batches so that every sample of
one timestamp is in one batch, so a histogram is never split) and moves the samples that break a rule of
`typecheck.rules` to the batch's rejects, with their line and the reason. Each distinct series is looked at once, by
its key's dictionary code; per batch the work is a few array passes, and none at all when no family of the
input is declared a counter, stateset, info, summary or histogram. A histogram that breaks a rule is rejected
whole (every bucket, `_sum` and `_count` line of that label set at that timestamp): its quantiles would be wrong.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import polars as pl

from canonical.prometheus import family_of
from canonical.schemas import RECORD_MAX_CHARS
from normalizers.exposition import RawBatch, Series
from normalizers.typecheck.rules import (
    BUCKETS,
    CHECKED_TYPES,
    COUNT,
    COUNTER,
    GCOUNT,
    HISTOGRAM_KINDS,
    INFO,
    STATESET,
    SUMMARY_COUNT,
    SUMMARY_SUM,
    Part,
    bucket_bound,
    histogram_problem,
    kind_of,
    sample_problem,
)

_UNSEEN = -1
_NO_TS = np.iinfo(np.int64).min  # samples without a timestamp share one instant


class TypeChecker:
    """Checks batches of one input in order; remembers each series' kind, histogram and bucket bound."""

    def __init__(self) -> None:
        self._kind = np.zeros(0, dtype=np.int8)    # per key code: a typecheck.rules kind, or _UNSEEN
        self._group = np.zeros(0, dtype=np.int64)  # per key code: the histogram (family, labels but le)
        self._le = np.zeros(0, dtype=np.float64)   # per key code: the bucket bound
        self._groups: dict[tuple[str, tuple[tuple[str, str], ...]], int] = {}

    def check(self, batch: RawBatch) -> RawBatch:
        """The batch without its type-invalid samples, which are added to its rejects."""
        samples = batch.samples
        if not samples.height or not CHECKED_TYPES.intersection(batch.types.values()):
            return batch
        codes = samples.get_column("key").to_physical().to_numpy()
        kinds = self._kinds(codes, samples, batch)
        suspect, histogram = _SUSPECT[kinds], _HISTOGRAM[kinds]
        if not suspect.any() and not histogram.any():
            return batch
        values = samples.get_column("value").to_numpy()
        lines = samples.get_column("line").to_numpy()
        bad: dict[int, str] = {}  # line -> reason
        if suspect.any():
            rows = np.flatnonzero(suspect)
            k, v = kinds[rows], values[rows]
            with np.errstate(invalid="ignore"):
                wrong = (((k == COUNTER) | (k == SUMMARY_COUNT)) & ~(v >= 0)) | ((k == SUMMARY_SUM) & np.isnan(v))
                wrong |= ((k == STATESET) & (v != 0) & (v != 1)) | ((k == INFO) & (v != 1))
            for i in rows[wrong]:
                reason = sample_problem(int(kinds[i]), float(values[i]))
                if reason is not None:
                    bad[int(lines[i])] = reason
        if histogram.any():
            ts = samples.get_column("ts_ms").fill_null(_NO_TS).to_numpy()
            bad.update(self._histograms(np.flatnonzero(histogram), codes, kinds, values, lines, ts))
        if not bad:
            return batch
        hit = pl.col("line").is_in(pl.Series(list(bad), dtype=pl.Int64).implode())
        rejects = samples.filter(hit).select(
            "line", pl.col("text").str.strip_chars_end("\r\n").str.slice(0, RECORD_MAX_CHARS).alias("record"),
            pl.col("line").replace_strict(bad, return_dtype=pl.String).alias("reason"))
        kept = samples.filter(~hit)
        merged = pl.concat([batch.rejects, rejects]).sort("line")
        return replace(batch, samples=kept, rejects=merged)

    def _kinds(self, codes: np.ndarray, samples: pl.DataFrame, batch: RawBatch) -> np.ndarray:
        """The kind of each sample, learning the series never seen before."""
        top = int(codes.max()) + 1
        if len(self._kind) < top:
            size = max(top, 2 * len(self._kind))
            self._kind = np.concatenate([self._kind, np.full(size - len(self._kind), _UNSEEN, dtype=np.int8)])
            self._group = np.concatenate([self._group, np.zeros(size - len(self._group), dtype=np.int64)])
            self._le = np.concatenate([self._le, np.zeros(size - len(self._le), dtype=np.float64)])
        kinds = self._kind[codes]
        if (kinds == _UNSEEN).any():
            unseen = samples.get_column("key").filter(pl.Series(kinds == _UNSEEN)).unique()
            for code, key in zip(unseen.to_physical().to_list(), unseen.cast(pl.String).to_list(), strict=True):
                self._learn(code, batch.series[key], batch.types)
            kinds = self._kind[codes]
        return kinds

    def _learn(self, code: int, series: Series, types: dict[str, str]) -> None:
        name, labels = series
        family = family_of(name, types)
        kind = kind_of(name, family, types)
        self._kind[code] = kind
        if kind in HISTOGRAM_KINDS:
            rest = tuple(sorted((k, v) for k, v in labels.items() if k != "le" or kind not in BUCKETS))
            self._group[code] = self._groups.setdefault((family or name, rest), len(self._groups))
            self._le[code] = bucket_bound(labels) if kind in BUCKETS else 0.0

    def _histograms(self, rows: np.ndarray, codes: np.ndarray, kinds: np.ndarray, values: np.ndarray,
                    lines: np.ndarray, ts: np.ndarray) -> dict[int, str]:
        """Reasons by line for every part of each histogram that breaks a rule."""
        line = lines[rows]
        if len(line) > 1 and not (line[1:] > line[:-1]).all():  # the careful parser's lines come after the rest
            rows = rows[np.argsort(line, kind="stable")]
        group, le, kind = self._group[codes[rows]], self._le[codes[rows]], kinds[rows]
        value, line, when = values[rows], lines[rows], ts[rows]
        starts = _runs(group, when)
        if len(np.unique(group[starts] * 1_000_003 + when[starts] % 1_000_003)) < len(starts):
            # a histogram in pieces (or two that look alike): gather each one's parts, in line order
            order = np.lexsort((line, when, group))
            group, le, kind, value, line, when = (a[order] for a in (group, le, kind, value, line, when))
            starts = _runs(group, when)
        suspect = self._suspects(starts, le, kind, value)
        out: dict[int, str] = {}
        ends = np.r_[starts[1:], len(group)]
        for a, b in zip(starts[suspect], ends[suspect], strict=True):
            parts = [Part(int(line[i]), int(kind[i]), float(le[i]), float(value[i])) for i in range(a, b)]
            found = histogram_problem(parts)
            if found is not None:
                reason = f"invalid histogram: {found[1]}" + ("" if "line" in found[1] else f" (line {found[0]})")
                out.update((p.line, reason) for p in parts)
        return out

    @staticmethod
    def _suspects(starts: np.ndarray, le: np.ndarray, kind: np.ndarray, value: np.ndarray) -> np.ndarray:
        """Which histograms (by start index) may break a rule: a cheap superset, each checked one by one after."""
        n = len(starts)
        inst = np.repeat(np.arange(n), np.diff(np.r_[starts, len(le)]))
        bucket = _BUCKET[kind]
        b = np.flatnonzero(bucket)  # buckets in line order within each histogram
        bi, ble, bv = inst[b], le[b], value[b]
        with np.errstate(invalid="ignore"):
            odd = np.isnan(ble) | ~(bv >= 0)
            odd[1:] |= (bi[1:] == bi[:-1]) & ~((ble[1:] > ble[:-1]) & (bv[1:] >= bv[:-1]))
            inf = ble == np.inf
            has_inf = np.bincount(bi[inf], minlength=n) > 0
            inf_value = np.full(n, np.nan)
            inf_value[bi[inf]] = bv[inf]
            t = np.flatnonzero(~bucket)  # _sum, _count, _gsum, _gcount
            ti, tv, tk = inst[t], value[t], kind[t]
            odd_total = ~(tv >= 0) | (((tk == COUNT) | (tk == GCOUNT)) & (tv != inf_value[ti]))
        found = np.bincount(bi[odd], minlength=n) + np.bincount(ti[odd_total], minlength=n)
        return (found > 0) | ~has_inf


def _runs(group: np.ndarray, when: np.ndarray) -> np.ndarray:
    """Where each run of one histogram (one group at one timestamp) starts."""
    return np.flatnonzero(np.r_[True, (group[1:] != group[:-1]) | (when[1:] != when[:-1])])


def _table(kinds: frozenset[int]) -> np.ndarray:
    """A lookup by kind (indexable by an int8 kind array)."""
    table = np.zeros(256, dtype=bool)
    table[list(kinds)] = True
    return table


_SUSPECT = _table(frozenset({COUNTER, STATESET, INFO, SUMMARY_SUM, SUMMARY_COUNT}))
_HISTOGRAM = _table(HISTOGRAM_KINDS)
_BUCKET = _table(BUCKETS)
