"""Canonical names and attribute keys as Prometheus names."""

from __future__ import annotations

import pytest

from canonical.feednames import (
    UNIT_SUFFIXES,
    attributes_of,
    canonical_of,
    family_name,
    feed_labels,
    label_name,
    sample_name,
)
from canonical.metrics import METRICS

NAMES = [
    ("accelerator.utilization", "accelerator_utilization_ratio", "accelerator_utilization_ratio"),
    ("accelerator.memory.used", "accelerator_memory_used_bytes", "accelerator_memory_used_bytes"),
    ("accelerator.memory.total", "accelerator_memory_total_bytes", "accelerator_memory_total_bytes"),
    ("accelerator.power", "accelerator_power_watts", "accelerator_power_watts"),
    ("accelerator.temperature", "accelerator_temperature_celsius", "accelerator_temperature_celsius"),
    ("accelerator.clock", "accelerator_clock_hertz", "accelerator_clock_hertz"),
    ("accelerator.health", "accelerator_health", "accelerator_health"),
    ("accelerator.energy", "accelerator_energy_joules", "accelerator_energy_joules_total"),
    ("interconnect.tx", "interconnect_tx_bytes_per_second", "interconnect_tx_bytes_per_second"),
    ("serving.requests", "serving_requests", "serving_requests_total"),
    ("serving.tokens.prompt", "serving_tokens_prompt", "serving_tokens_prompt_total"),
    ("serving.requests.running", "serving_requests_running", "serving_requests_running"),
    ("serving.kv_cache.usage", "serving_kv_cache_usage_ratio", "serving_kv_cache_usage_ratio"),
    ("serving.time_to_first_token", "serving_time_to_first_token_seconds", "serving_time_to_first_token_seconds"),
]


@pytest.mark.parametrize(("metric", "family", "sample"), NAMES)
def test_names(metric: str, family: str, sample: str) -> None:
    assert family_name(metric) == family
    assert sample_name(metric) == sample


def test_every_catalog_unit_has_a_suffix_and_names_are_distinct() -> None:
    assert {m.unit for m in METRICS.values()} <= set(UNIT_SUFFIXES)
    assert len({sample_name(m) for m in METRICS}) == len(METRICS)


def test_unknown_metric_is_refused() -> None:
    with pytest.raises(KeyError, match="not a canonical metric"):
        family_name("accelerator.magic")


@pytest.mark.parametrize(("key", "label"), [
    ("engine", "engine"), ("stat", "stat"), ("model-name", "model_name"), ("a.b", "a_b"),
    ("pool", "attr_pool"), ("vendor", "attr_vendor"), ("0x", "attr_0x"), ("__name__", "attr_name__"),
])
def test_label_names(key: str, label: str) -> None:
    assert label_name(key) == label


def test_feed_labels_keep_the_base_labels() -> None:
    assert feed_labels("p", "n", "d", "nvidia", {"pool": "other", "engine": "vllm"}) == {
        "pool": "p", "node": "n", "device": "d", "vendor": "nvidia", "attr_pool": "other", "engine": "vllm"}


@pytest.mark.parametrize(("name", "expected"), [
    ("accelerator_power_watts", ("accelerator.power", "")),
    ("accelerator_energy_joules_total", ("accelerator.energy", "")),
    ("serving_time_to_first_token_seconds_bucket", ("serving.time_to_first_token", "_bucket")),
    ("serving_request_duration_seconds_count", ("serving.request.duration", "_count")),
    ("accelerator_energy_joules", None),  # a counter is read only under its _total sample
    ("serving_time_to_first_token_seconds", None),  # a histogram only in its parts
    ("accelerator_errors_total", None),  # events have their own names
    ("DCGM_FI_DEV_POWER_USAGE", None),
])
def test_canonical_of_inverts_the_sample_names(name: str, expected: tuple[str, str] | None) -> None:
    assert canonical_of(name) == expected


def test_attributes_of_inverts_feed_labels() -> None:
    attrs = {"pool": "shadowed", "engine": "vllm", "gpu_uuid": "GPU-1"}
    labels = feed_labels("h100-a", "n1", "0", "nvidia", attrs)
    labels.update({"job": "hetpool", "instance": "127.0.0.1:9400"})
    assert attributes_of(labels) == attrs
    assert attributes_of({"le": "0.5", "engine": "x"}, skip=("le",)) == {"engine": "x"}


def test_a_part_of_a_device_is_labelled_and_no_attribute_shadows_the_scope() -> None:
    whole = feed_labels("h100-a", "n1", "0", "nvidia", {"scope": "sm"})
    part = feed_labels("h100-a", "n1", "0", "nvidia", {"scope": "sm"}, device_wide=False)
    assert "scope" not in whole and whole["attr_scope"] == "sm"
    assert part["scope"] == "component" and part["attr_scope"] == "sm"
    assert attributes_of(part) == attributes_of(whole) == {"scope": "sm"}
