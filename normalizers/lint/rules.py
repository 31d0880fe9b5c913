"""What `lint` asks of the samples of one family: their values for the family's type, their label sets, their
histograms. `typecheck.rules` has the rules ingest applies too; the ones only OpenMetrics has are here."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from normalizers.lint.line import Sample
from normalizers.typecheck.rules import (
    BUCKET,
    BUCKETS,
    COUNT,
    GCOUNT,
    GSUM,
    HISTOGRAM_KINDS,
    SUM,
    SUMMARY_COUNT,
    SUMMARY_SUM,
    Part,
    bucket_bound,
    histogram_problem,
    kind_of,
    sample_problem,
)

# The sample names a family of each type has (its name plus one of these); any other type: the name itself.
OM_SUFFIXES = {"counter": ("_total", "_created"), "summary": ("", "_count", "_sum", "_created"),
               "histogram": ("_count", "_sum", "_bucket", "_created"),
               "gaugehistogram": ("_gcount", "_gsum", "_bucket"), "info": ("_info",)}
PROM_SUFFIXES = {"histogram": ("_bucket", "_sum", "_count"), "summary": ("", "_sum", "_count")}
Finding = tuple[int, str, str, bool]  # line, rule, message, whether it is only a warning


def group_of(sample: Sample, family: str, kind: str) -> tuple[tuple[str, str], ...]:
    """The label set that makes one metric of a family: without le, quantile or the stateset's own label."""
    if kind == "info":
        return ()
    drop = {"histogram": "le", "gaugehistogram": "le", "summary": "quantile", "stateset": family}.get(kind)
    if (drop == "le" and not sample.name.endswith("_bucket")) or (drop == "quantile" and sample.name != family):
        drop = None
    return tuple(sorted((k, v) for k, v in sample.labels.items() if k != drop))


@dataclass
class Values:
    """The value rules of one family's samples, and its histograms gathered for the check at its end."""

    name: str
    type: str
    openmetrics: bool
    histograms: dict[tuple[object, ...], list[Part]] = field(default_factory=dict)

    def sample(self, line: int, s: Sample) -> list[Finding]:
        """The problems of one sample's value and labels."""
        out: list[Finding] = []
        kind = kind_of(s.name, self.name, {self.name: self.type})
        om = self.openmetrics
        why = sample_problem(kind, s.value)
        if why:
            out.append((line, self.type, why, False))
        if kind in HISTOGRAM_KINDS:
            le = bucket_bound(s.labels) if kind in BUCKETS else 0.0
            key = (group_of(s, self.name, self.type), s.ts_text)
            self.histograms.setdefault(key, []).append(Part(line, kind, le, s.value))
            if om and kind in BUCKETS and le == math.inf and s.labels.get("le") != "+Inf":
                out.append((line, self.type, f"le={s.labels['le']!r}: OpenMetrics writes the last bound \"+Inf\"",
                            False))
        if kind in (*BUCKETS, COUNT, GCOUNT, SUMMARY_COUNT) and not math.isnan(s.value) and not (
                math.isfinite(s.value) and s.value.is_integer()):
            out.append((line, self.type, f"{s.name} is {s.value_text}; a count of observations is a whole number",
                        not om))
        if self.type == "summary" and s.name == self.name:
            out += self._quantile(line, s)
        if om and kind == SUMMARY_SUM and s.value < 0:
            out.append((line, "summary", f"_sum is {s.value_text}; it is a counter, never negative", False))
        if self.type == "stateset" and self.name not in s.labels:
            out.append((line, "stateset", f"a stateset's samples carry the label {self.name!r} naming the state",
                        False))
        if om and s.exemplar and not ((self.type in ("histogram", "gaugehistogram") and kind in BUCKETS)
                                      or (self.type == "counter" and s.name.endswith("_total"))):
            out.append((line, "exemplar", "only histogram buckets and counter _total samples have exemplars",
                        False))
        return out

    def _quantile(self, line: int, s: Sample) -> list[Finding]:
        raw = s.labels.get("quantile")
        try:
            q = float(raw) if raw is not None else math.nan
        except ValueError:
            q = math.nan
        if not 0 <= q <= 1:
            return [(line, "summary", f"quantile={raw!r}: a summary's quantile label is a number from 0 to 1", False)]
        if self.openmetrics and s.value < 0:
            return [(line, "summary", f"quantile value {s.value_text} is negative", False)]
        return []

    def finish(self) -> list[Finding]:
        """The problems of each histogram of the family, one per histogram."""
        out: list[Finding] = []
        for parts in self.histograms.values():
            found = histogram_problem(sorted(parts))
            if found is not None:
                out.append((found[0], self.type, found[1], False))
            elif self.openmetrics:
                out += self._openmetrics(parts)
            else:
                kinds = {p.kind for p in parts}
                if BUCKET in kinds and not {SUM, COUNT} <= kinds:
                    out.append((parts[0].line, "histogram", "a histogram exposes _sum and _count as well", True))
        return out

    def _openmetrics(self, parts: list[Part]) -> list[Finding]:
        kinds = {p.kind for p in parts}
        first = min(p.line for p in parts)
        count, total = (GCOUNT, GSUM) if self.type == "gaugehistogram" else (COUNT, SUM)
        if (count in kinds) != (total in kinds):
            have, lack = ("_count", "_sum") if count in kinds else ("_sum", "_count")
            if count == GCOUNT:
                have, lack = "_g" + have[1:], "_g" + lack[1:]
            return [(first, self.type, f"{have} without {lack}: OpenMetrics has both or neither", False)]
        if SUM in kinds and any(p.kind == BUCKET and p.le < 0 for p in parts):
            return [(first, self.type, "a histogram with negative bucket bounds has no _sum", False)]
        return []
