"""What a sample's declared # TYPE allows of its value, one sample or one histogram at a time.

The rules both exposition formats share: a counter counts up from 0, so it is never negative or NaN; a
stateset's values are 0 and 1 and an info's is 1; a histogram's (and a gauge histogram's) buckets come in
increasing order of `le`, each holds at least the previous one, the last is `le="+Inf"` and its `_count` is
that bucket's value; a `_sum` is negative only when some bucket bound is (OpenMetrics forbids it outright, but
a Prometheus histogram with negative bounds may carry one). These are the values that corrupt what is computed
from them (rates, quantiles), so ingest rejects them; `lint` adds the rules only OpenMetrics has.

The rules are spelled out here once, in plain Python; the package `typecheck` finds the samples that may break one
in a vectorized pass and asks these functions about those only.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import NamedTuple

# Sample kinds: what a sample is within its family, given the family's # TYPE.
(PLAIN, COUNTER, STATESET, INFO, SUMMARY_SUM, SUMMARY_COUNT, BUCKET, SUM, COUNT, GBUCKET, GSUM, GCOUNT,
 CREATED) = range(13)
HISTOGRAM_KINDS = frozenset({BUCKET, SUM, COUNT, GBUCKET, GSUM, GCOUNT})
BUCKETS = frozenset({BUCKET, GBUCKET})
CHECKED_TYPES = frozenset({"counter", "stateset", "info", "summary", "histogram", "gaugehistogram"})

_SUFFIXES: dict[str, dict[str, int]] = {
    "counter": {"": COUNTER, "_total": COUNTER, "_created": CREATED},
    "stateset": {"": STATESET},
    "info": {"": INFO, "_info": INFO},
    "summary": {"_sum": SUMMARY_SUM, "_count": SUMMARY_COUNT, "_created": CREATED},
    "histogram": {"_bucket": BUCKET, "_sum": SUM, "_count": COUNT, "_created": CREATED},
    "gaugehistogram": {"_bucket": GBUCKET, "_gsum": GSUM, "_gcount": GCOUNT},
}


def kind_of(name: str, family: str | None, types: dict[str, str]) -> int:
    """The kind of a sample named `name` in `family` (None: no # TYPE covers it)."""
    if family is None:
        return PLAIN
    return _SUFFIXES.get(types[family], {}).get(name[len(family):], PLAIN)


def bucket_bound(labels: dict[str, str]) -> float:
    """A bucket's `le` as a number; NaN when it is missing or not a number."""
    try:
        return float(labels["le"])
    except (KeyError, ValueError):
        return math.nan


def number(value: float) -> str:
    """A value as exposition text writes it: NaN, +Inf, -Inf or the shortest decimal."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return f"{value:.12g}"


def sample_problem(kind: int, value: float) -> str | None:
    """Why one sample's value is not allowed for its kind, or None (histogram parts are judged together)."""
    if kind in (COUNTER, SUMMARY_COUNT) and (math.isnan(value) or value < 0):
        what = "counter value" if kind == COUNTER else "summary _count"
        told = "NaN" if math.isnan(value) else f"{number(value)}, negative"
        return f"{what} is {told}; it counts up from 0"
    if kind == SUMMARY_SUM and math.isnan(value):
        return "summary _sum is NaN"
    if kind == STATESET and value not in (0.0, 1.0):
        return f"stateset value {number(value)} is not 0 or 1"
    if kind == INFO and value != 1.0:
        return f"info value {number(value)} is not 1"
    return None


class Part(NamedTuple):
    """One sample of a histogram: its line, kind, bucket bound (buckets only) and value."""

    line: int
    kind: int
    le: float
    value: float


def histogram_problem(parts: Iterable[Part]) -> tuple[int, str] | None:
    """The first problem of one histogram (one label set at one timestamp), with the line it is on, or None.

    Parts come in line order. A part that repeats an earlier one (same kind and bound) is a duplicate line,
    not a second histogram, and is left to the duplicate check.
    """
    seen: set[tuple[int, float]] = set()
    buckets: list[Part] = []
    totals: dict[int, Part] = {}
    for p in parts:
        ident = (p.kind, p.le if p.kind in BUCKETS else 0.0)
        if ident in seen and not math.isnan(ident[1]):
            continue
        seen.add(ident)
        if p.kind in BUCKETS:
            buckets.append(p)
        else:
            totals.setdefault(p.kind, p)
    gauge = any(k in (GBUCKET, GSUM, GCOUNT) for k, _ in seen)
    count, total = ("_gcount", "_gsum") if gauge else ("_count", "_sum")
    first = min([b.line for b in buckets] + [t.line for t in totals.values()])
    prev: Part | None = None
    for b in buckets:
        le = f'le="{number(b.le)}"'
        if math.isnan(b.le):
            return b.line, "a bucket has no numeric le label"
        if math.isnan(b.value) or b.value < 0:
            return b.line, f"bucket {le} holds {number(b.value)}; a bucket counts observations, never below 0"
        if prev is not None and b.le <= prev.le:
            return b.line, (f'bucket {le} comes after le="{number(prev.le)}" (line {prev.line}); buckets go in '
                            "increasing order of le, each once")
        if prev is not None and b.value < prev.value:
            return b.line, (f'bucket {le} holds {number(b.value)}, less than le="{number(prev.le)}" (line '
                            f"{prev.line}) with {number(prev.value)}; buckets are cumulative")
        prev = b
    if prev is None or prev.le != math.inf:
        return first, 'no le="+Inf" bucket; the last bucket counts every observation'
    n = totals.get(GCOUNT if gauge else COUNT)
    if n is not None and (math.isnan(n.value) or n.value < 0):
        return n.line, f"{count} is {number(n.value)}; it counts observations, never below 0"
    if n is not None and n.value != prev.value:
        return n.line, (f'{count} is {number(n.value)} but the le="+Inf" bucket (line {prev.line}) holds '
                        f"{number(prev.value)}; both count every observation")
    s = totals.get(GSUM if gauge else SUM)
    if s is not None and math.isnan(s.value):
        return s.line, f"{total} is NaN"
    if s is not None and s.value < 0 and buckets[0].le >= 0:
        return s.line, (f"{total} is {number(s.value)} but no bucket bound is negative, so no observation can "
                        "be below 0")
    return None
