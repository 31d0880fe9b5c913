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


# The names, each written once: every other module names a canonical metric by these constants (a test finds any
# other module writing one as a string).
UTILIZATION = "accelerator.utilization"
MEMORY_USED = "accelerator.memory.used"
MEMORY_TOTAL = "accelerator.memory.total"
POWER = "accelerator.power"
TEMPERATURE = "accelerator.temperature"
CLOCK = "accelerator.clock"
HEALTH = "accelerator.health"
ERRORS = "accelerator.errors"
ENERGY = "accelerator.energy"
LINK_TX = "interconnect.tx"
LINK_RX = "interconnect.rx"
TTFT = "serving.time_to_first_token"
TPOT = "serving.time_per_output_token"
REQUEST_DURATION = "serving.request.duration"
REQUESTS = "serving.requests"
PROMPT_TOKENS = "serving.tokens.prompt"
GENERATED_TOKENS = "serving.tokens.generated"
RUNNING = "serving.requests.running"
WAITING = "serving.requests.waiting"
KV_USAGE = "serving.kv_cache.usage"
# prompt tokens served from the prefix cache over prompt tokens looked up: vLLM's hits over queries counters (since
# the engine started), SGLang's cache hit rate (over its recent batches)
PREFIX_CACHE_HIT = "serving.prefix_cache.hit_ratio"

# Units and kinds from the design's canonical schema table.
METRICS: dict[str, Canonical] = {c.name: c for c in (
    Canonical(UTILIZATION, "ratio", "gauge"),
    Canonical(MEMORY_USED, "bytes", "gauge"),
    Canonical(MEMORY_TOTAL, "bytes", "gauge"),
    Canonical(POWER, "W", "gauge"),
    Canonical(TEMPERATURE, "celsius", "gauge"),
    Canonical(CLOCK, "Hz", "gauge"),
    Canonical(HEALTH, "bool", "gauge"),
    Canonical(ERRORS, "count", "events"),
    Canonical(ENERGY, "J", "counter"),
    Canonical(LINK_TX, "bytes/s", "gauge"),
    Canonical(LINK_RX, "bytes/s", "gauge"),
    Canonical(TTFT, "s", "histogram"),
    Canonical(TPOT, "s", "histogram"),
    Canonical(REQUEST_DURATION, "s", "histogram"),
    Canonical(REQUESTS, "count", "counter"),
    Canonical(PROMPT_TOKENS, "count", "counter"),
    Canonical(GENERATED_TOKENS, "count", "counter"),
    Canonical(RUNNING, "count", "gauge"),
    Canonical(WAITING, "count", "gauge"),
    Canonical(KV_USAGE, "ratio", "gauge"),
    Canonical(PREFIX_CACHE_HIT, "ratio", "gauge"),
)}

ERRORS_METRIC = ERRORS

# The canonical metrics a pool's exporter must deliver before its devices count as abstracted (the onboarding
# tracker's "canonical metrics flowing" item, and `hetpool check`). Health is not among them: some exporters
# (Gaudi's) have no health gauge.
CORE_METRICS = (UTILIZATION, MEMORY_USED, MEMORY_TOTAL, POWER, TEMPERATURE)

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
