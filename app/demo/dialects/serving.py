"""Shared shape of prometheus_client engine output: counters with _total, histograms with _bucket/_sum/_count."""

from __future__ import annotations

import numpy as np

from app.demo.dialects.base import EngineSlice, le_text
from app.demo.expo import Family, family, labels_text


def histogram(name: str, help_: str, labels: list[tuple[str, str]], bounds: tuple[float, ...],
              data: tuple[np.ndarray, np.ndarray, np.ndarray]) -> Family:
    """One histogram family: a _bucket per bound plus +Inf, then _sum and _count, labels before le."""
    buckets, total, count = data
    series: dict[str, np.ndarray] = {}
    for j, bound in enumerate((*bounds, float("inf"))):
        series[f"{name}_bucket{_labels([*labels, ('le', le_text(bound))])}"] = (
            buckets[:, j] if j < len(bounds) else count)
    series[f"{name}_sum{_labels(labels)}"] = total
    series[f"{name}_count{_labels(labels)}"] = count
    return family(name, help_, "histogram", series, decimals=4)


def counter(name: str, help_: str, labels: list[tuple[str, str]], values: np.ndarray) -> Family:
    """A counter family written as prometheus_client does: the sample name ends in _total."""
    return family(name, help_, "counter", {f"{name}_total{_labels(labels)}": values})


def gauge(name: str, help_: str, labels: list[tuple[str, str]], values: np.ndarray, decimals: int = 0) -> Family:
    """A one-series gauge family."""
    return family(name, help_, "gauge", {f"{name}{_labels(labels)}": values}, decimals)


def _labels(pairs: list[tuple[str, str]]) -> str:
    return labels_text(pairs)


def seen(values: np.ndarray) -> np.ndarray:
    """A labelled counter child exists from its first increment on: NaN before that."""
    started = np.maximum.accumulate(values > 0)
    return np.where(started, values, np.nan)


def finished_reasons(es: EngineSlice) -> dict[str, np.ndarray]:
    """Cumulative finished requests per reason, each series present once it has counted something."""
    return {reason: seen(values) for reason, values in es.finished.items()}
