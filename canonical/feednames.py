"""Canonical dotted names and attribute keys as Prometheus names: units as suffixes, counters ending in _total."""

from __future__ import annotations

import re

from canonical.metrics import METRICS
from canonical.prometheus import COUNTER_SUFFIX, HISTOGRAM_PARTS

# Prometheus naming conventions: base units, spelled out, plural; counts and booleans carry no unit suffix.
UNIT_SUFFIXES: dict[str, str] = {
    "ratio": "ratio",
    "bytes": "bytes",
    "W": "watts",
    "celsius": "celsius",
    "Hz": "hertz",
    "J": "joules",
    "bytes/s": "bytes_per_second",
    "s": "seconds",
    "bool": "",
    "count": "",
}
FEED_KINDS = ("gauge", "counter")  # the kinds whose newest value means something on its own
BASE_LABELS = ("pool", "node", "device", "vendor")
# a series of one part of its device (a profile's `scope: component`) says so; device views read only the others
SCOPE_LABEL, COMPONENT_SCOPE = "scope", "component"
_OWN_LABELS = (*BASE_LABELS, SCOPE_LABEL)  # labels the feed sets itself, which no attribute may shadow
_INVALID = re.compile(r"[^a-zA-Z0-9_]")


def family_name(metric: str) -> str:
    """The metric family name: 'accelerator.memory.used' -> 'accelerator_memory_used_bytes'."""
    canon = METRICS.get(metric)
    if canon is None:
        raise KeyError(f"{metric!r} is not a canonical metric")
    base = _INVALID.sub("_", canon.name)
    suffix = UNIT_SUFFIXES[canon.unit]
    return f"{base}_{suffix}" if suffix and not base.endswith(f"_{suffix}") else base


def sample_name(metric: str) -> str:
    """The name a sample of the metric carries in the exposition: counters end in _total."""
    name = family_name(metric)
    return name + COUNTER_SUFFIX if METRICS[metric].kind == "counter" else name


def label_name(key: str) -> str:
    """An attribute key as a label name: invalid characters become '_', and the base labels are not shadowed."""
    name = _INVALID.sub("_", key) or "_"
    if name[0].isdigit() or name.startswith("__"):
        name = f"attr_{name.lstrip('_')}"
    return f"attr_{name}" if name in _OWN_LABELS else name


def feed_labels(pool: str, node: str, device: str, vendor: str, attributes: dict[str, str],
                device_wide: bool = True) -> dict[str, str]:
    """The label set of one series: the base labels, scope="component" for a part of a device, then every
    attribute under its label name."""
    labels = {"pool": pool, "node": node, "device": device, "vendor": vendor}
    if not device_wide:
        labels[SCOPE_LABEL] = COMPONENT_SCOPE
    for key, value in sorted(attributes.items()):
        labels.setdefault(label_name(key), str(value))
    return labels


# Error events, histograms and versions under canonical names: what the feed serves, what `hetpool rules`
# records and what `--canonical` ingest reads back.
ERRORS_FAMILY = "accelerator_errors"  # a counter: the events of one device, class, severity and code so far
ERRORS_SAMPLE = ERRORS_FAMILY + COUNTER_SUFFIX
ERROR_STATE = "accelerator_error_state"  # a gauge: 1 while a sticky code or bitmask bit is held, else 0
ERROR_LABELS = ("error_class", "severity", "code")
VERSION_FAMILY = "hetpool_software_version"  # an info series per component: value 1, the version a label
VERSION_SAMPLE = VERSION_FAMILY + "_info"
VERSION_LABELS = ("component", "version")
# labels a Prometheus between adds to what it scrapes (scrape the feed with honor_labels: true to keep the
# feed's own); canonical ingest drops them
SCRAPE_LABELS = ("job", "instance")
_BY_SAMPLE: dict[str, tuple[str, str]] = {}


def canonical_of(name: str) -> tuple[str, str] | None:
    """A feed sample name as (canonical metric, part): part is '' or a histogram's '_bucket'/'_sum'/'_count'."""
    if not _BY_SAMPLE:
        for metric, canon in METRICS.items():
            if canon.kind == "histogram":
                for part in HISTOGRAM_PARTS:
                    _BY_SAMPLE[family_name(metric) + part] = (metric, part)
            elif canon.kind in FEED_KINDS:
                _BY_SAMPLE[sample_name(metric)] = (metric, "")
    return _BY_SAMPLE.get(name)


def attributes_of(labels: dict[str, str], skip: tuple[str, ...] = ()) -> dict[str, str]:
    """The attributes of a feed label set: feed_labels' inverse for every label not the feed's own, a scrape's or in
    `skip`."""
    out: dict[str, str] = {}
    for name, value in labels.items():
        if name in _OWN_LABELS or name in SCRAPE_LABELS or name in skip or name == "__name__":
            continue
        key = name[len("attr_"):] if name.startswith("attr_") and name[len("attr_"):] in _OWN_LABELS else name
        out[key] = value
    return out
