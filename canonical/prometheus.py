"""How Prometheus names the samples of one metric family: histogram parts, counter and OpenMetrics suffixes."""

from __future__ import annotations

HISTOGRAM_PARTS = ("_bucket", "_sum", "_count")
COUNTER_SUFFIX = "_total"
CREATED_SUFFIX = "_created"  # a counter's or histogram's creation time, not a sample of it
SAMPLE_SUFFIXES = (*HISTOGRAM_PARTS, COUNTER_SUFFIX, CREATED_SUFFIX)
FAMILY_SUFFIXES = (*SAMPLE_SUFFIXES, "_gsum", "_gcount", "_info")  # with OpenMetrics gauge histograms and info


def family_of(name: str, families: dict[str, str] | set[str]) -> str | None:
    """The family a sample name belongs to among `families` (itself, or its name without a suffix)."""
    if name in families:
        return name
    for suffix in FAMILY_SUFFIXES:
        if name.endswith(suffix) and name[: -len(suffix)] in families:
            return name[: -len(suffix)]
    return None
