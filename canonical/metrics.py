"""The canonical metric catalog and error taxonomy: the contract every profile maps into and the feed carries."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Canonical:
    """One canonical metric: its unit, how its values behave over time, and whether it describes a device.

    A per-device metric may have several series on one device (an engine, a memory pool, a secondary
    sensor); the profiles mark those `scope: component`, and the console's device views read only the
    series that describe the device as a whole.
    """

    name: str
    unit: str
    kind: str  # gauge, counter, histogram, events

    @property
    def per_device(self) -> bool:
        """True for the accelerator metrics, whose device-wide series the device views read."""
        return self.name.startswith("accelerator.")


# Names, units and kinds from the design's canonical schema table.
METRICS: dict[str, Canonical] = {c.name: c for c in (
    Canonical("accelerator.utilization", "ratio", "gauge"),
    Canonical("accelerator.memory.used", "bytes", "gauge"),
    Canonical("accelerator.memory.total", "bytes", "gauge"),
    Canonical("accelerator.power", "W", "gauge"),
    Canonical("accelerator.temperature", "celsius", "gauge"),
    Canonical("accelerator.clock", "Hz", "gauge"),
    Canonical("accelerator.health", "bool", "gauge"),
    Canonical("accelerator.errors", "count", "events"),
    Canonical("accelerator.energy", "J", "counter"),
    Canonical("interconnect.tx", "bytes/s", "gauge"),
    Canonical("interconnect.rx", "bytes/s", "gauge"),
    Canonical("serving.time_to_first_token", "s", "histogram"),
    Canonical("serving.time_per_output_token", "s", "histogram"),
    Canonical("serving.request.duration", "s", "histogram"),
    Canonical("serving.requests", "count", "counter"),
    Canonical("serving.tokens.prompt", "count", "counter"),
    Canonical("serving.tokens.generated", "count", "counter"),
    Canonical("serving.requests.running", "count", "gauge"),
    Canonical("serving.requests.waiting", "count", "gauge"),
    Canonical("serving.kv_cache.usage", "ratio", "gauge"),
)}

ERRORS_METRIC = "accelerator.errors"

# The canonical metrics a pool's exporter must deliver before its devices count as abstracted (the onboarding
# tracker's "canonical metrics flowing" item, and `hetpool check`). Health is not among them: some exporters
# (Gaudi's) have no health gauge.
CORE_METRICS = ("accelerator.utilization", "accelerator.memory.used", "accelerator.memory.total",
                "accelerator.power", "accelerator.temperature")

ERROR_CLASSES = (
    "memory_uncorrectable", "memory_correctable", "row_remap_failure", "interconnect", "device_lost",
    "reset_required", "thermal", "power", "driver_firmware", "application", "unknown",
)
SEVERITIES = ("fatal", "recoverable", "informational")

# Attribute keys the normalizer itself writes; a profile may not reuse them for labels.
RESERVED_ATTRIBUTES = ("stat", "le", "code", "error_class", "severity")


@dataclass(frozen=True)
class ErrorClass:
    """Where a vendor error code lands in the unified taxonomy."""

    error_class: str
    severity: str

    def __str__(self) -> str:
        return f"{self.error_class}/{self.severity}"


CATALOG_VERSION = "1"  # raised whenever a metric, unit, kind, error class or severity above changes
