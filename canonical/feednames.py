"""Canonical dotted names and attribute keys as Prometheus names: units as suffixes, counters ending in _total."""

from __future__ import annotations

import re

from canonical.metrics import METRICS
from canonical.prometheus import COUNTER_SUFFIX

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
    return f"attr_{name}" if name in BASE_LABELS else name


def feed_labels(pool: str, node: str, device: str, vendor: str, attributes: dict[str, str]) -> dict[str, str]:
    """The label set of one series: the base labels, then every attribute under its label name."""
    labels = {"pool": pool, "node": node, "device": device, "vendor": vendor}
    for key, value in sorted(attributes.items()):
        labels.setdefault(label_name(key), str(value))
    return labels
