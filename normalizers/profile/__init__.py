"""A vendor profile as frozen data: how one exporter dialect maps onto the canonical schema."""

from __future__ import annotations

from dataclasses import dataclass, field

from canonical.metrics import METRICS, ErrorClass
from canonical.prometheus import COUNTER_SUFFIX, CREATED_SUFFIX, HISTOGRAM_PARTS, SAMPLE_SUFFIXES

STICKY = "sticky_code"  # the value is the last code seen (0: none); an event is a change to a non-zero code
COUNTER = "counter"     # the value counts events since the exporter started; increases are events
BITMASK = "bitmask"     # the value is a set of flags (a throttle-reason mask); each bit that turns on is an event
ERROR_KINDS = (STICKY, COUNTER, BITMASK)
MAX_BITS = 64
PREFIX_MARK = "*"  # an `ignore` entry ending in it is a name prefix
STATS = ("bucket", "sum", "count")
DEVICE, COMPONENT = "device", "component"
SCOPES = (DEVICE, COMPONENT)  # a series describes its device as a whole, or one part of it


@dataclass(frozen=True)
class ValueRule:
    """What a source value must look like before it becomes a number in the store."""

    min: float | None = None
    max: float | None = None
    reject_values: dict[float, str] = field(default_factory=dict)  # value -> why it means "no data"
    values: dict[float, float] = field(default_factory=dict)        # remap; other values are refused

    @property
    def empty(self) -> bool:
        """True when the rule checks nothing."""
        return self.min is None and self.max is None and not self.reject_values and not self.values


@dataclass(frozen=True)
class Derive:
    """An attribute computed from a label value through a table (finished_reason -> outcome)."""

    attribute: str
    label: str
    values: dict[str, str]
    default: str | None = None


@dataclass(frozen=True)
class MetricMap:
    """One source metric (optionally narrowed by label values) onto one canonical metric."""

    source: str
    metric: str
    unit: str
    factor: float
    when: dict[str, str] = field(default_factory=dict)
    attributes: dict[str, str] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)   # source label -> attribute key
    derive: tuple[Derive, ...] = ()
    rule: ValueRule = field(default_factory=ValueRule)
    stat: str | None = None  # a counter standing for one part of a canonical histogram (sum or count)
    scope: str = DEVICE

    def matches(self, labels: dict[str, str]) -> bool:
        """True when every `when` label has the wanted value."""
        return all(labels.get(k) == v for k, v in self.when.items())


@dataclass(frozen=True)
class Derived:
    """A canonical metric computed from several source metrics at the same instant: their sum, or (`ratio`) the first
    over the second (vLLM's prefix-cache hits over its queries)."""

    metric: str
    unit: str
    factor: float
    inputs: tuple[str, ...]
    scope: str = DEVICE
    ratio: bool = False


@dataclass(frozen=True)
class BitCode:
    """What one bit of a bitmask error signal means: its code text and class."""

    code: str
    error_class: ErrorClass


@dataclass(frozen=True)
class ErrorMap:
    """A vendor error signal: how its values become error events with a class and a severity."""

    source: str
    kind: str
    code_format: str = "decimal"           # how a code in the value is written: decimal or hex
    code_label: str | None = None          # the code is this label's value instead of the sample value
    code: str | None = None                # a fixed code (an ECC counter has no code of its own)
    fixed: ErrorClass | None = None        # one class for every event of this source
    codes: dict[str, ErrorClass] = field(default_factory=dict)
    default: ErrorClass | None = None      # for codes not in `codes`
    by_label: str | None = None            # class chosen by this label's value...
    label_classes: dict[str, ErrorClass] = field(default_factory=dict)  # ...through this table
    series_labels: tuple[str, ...] = ()    # labels that tell this source's series on one device apart
    bits: dict[int, BitCode] = field(default_factory=dict)  # kind bitmask: bit number -> code and class

    @property
    def known_mask(self) -> int:
        """The bits a bitmask signal may set; any other set bit is a reject."""
        return sum(1 << bit for bit in self.bits)

    def bit_codes(self, mask: int) -> tuple[BitCode, ...]:
        """The code and class of each set bit of a mask, lowest bit first (unknown bits are skipped)."""
        return tuple(self.bits[bit] for bit in sorted(self.bits) if mask >> bit & 1)

    def format_code(self, value: float) -> str:
        """The vendor's own spelling of a code carried in a sample value."""
        n = int(value)
        return f"{n:X}" if self.code_format == "hex" else str(n)

    def classify(self, code: str, labels: dict[str, str]) -> ErrorClass | None:
        """The class of one event, or None when nothing in the profile covers it."""
        if self.by_label is not None:
            return self.label_classes.get(labels.get(self.by_label, ""), self.default)
        if self.fixed is not None:
            return self.fixed
        return self.codes.get(code.upper() if self.code_format == "hex" else code, self.default)


@dataclass(frozen=True)
class VersionLabel:
    """A label that carries a software or firmware version."""

    label: str
    component: str
    per_device: bool = False


@dataclass(frozen=True)
class Sentinel:
    """Values at or above a threshold mean "no data" for every metric of the profile."""

    at_or_above: float
    reason: str


@dataclass(frozen=True)
class Target:
    """The entry of a profile that covers one source series: a metric map (with the histogram part it is), an
    error signal, the derived metrics it feeds, or none of them (ignored)."""

    mapping: MetricMap | None = None
    stat: str | None = None
    le: str | None = None
    error: ErrorMap | None = None
    inputs: tuple[Derived, ...] = ()


IGNORED = Target()  # the profile's `ignore` names it: counted, neither stored nor rejected


@dataclass(frozen=True)
class Profile:
    """Everything needed to normalize one exporter dialect; loaded from one YAML file."""

    name: str
    source: str
    vendor: str = ""
    description: str = ""
    detect: tuple[str, ...] = ()
    node_labels: tuple[str, ...] = ()
    device_labels: tuple[str, ...] = ()
    labels: dict[str, str] = field(default_factory=dict)
    versions: tuple[VersionLabel, ...] = ()
    sentinels: tuple[Sentinel, ...] = ()
    metrics: dict[str, tuple[MetricMap, ...]] = field(default_factory=dict)
    derived: tuple[Derived, ...] = ()
    errors: dict[str, ErrorMap] = field(default_factory=dict)
    ignore: tuple[str, ...] = ()  # known metrics deliberately not mapped: names (families) or `prefix*`

    def ignores(self, name: str, *, prefixes: bool = True) -> str | None:
        """The `ignore` entry that covers a metric name, or None."""
        for entry in self.ignore:
            if entry.endswith(PREFIX_MARK):
                if prefixes and name.startswith(entry[:-1]):
                    return entry
            # an ignored family covers the samples its exposition type adds to the name (_bucket, _total, ...)
            elif name == entry or any(name == entry + suffix for suffix in SAMPLE_SUFFIXES):
                return entry
        return None

    def inputs_of(self, name: str) -> tuple[Derived, ...]:
        """Derived metrics that consume this source metric."""
        return tuple(d for d in self.derived if name in d.inputs)

    def names(self) -> set[str]:
        """Every source metric name this profile mentions."""
        out = set(self.metrics) | set(self.errors)
        for d in self.derived:
            out.update(d.inputs)
        return out

    def target(self, name: str, labels: dict[str, str]) -> Target | str:
        """Which entry of this profile covers a series (name and labels), or the reason none does."""
        if name in self.errors:
            return Target(error=self.errors[name])
        inputs = self.inputs_of(name)
        if name in self.metrics:
            maps = self.metrics[name]
            chosen = next((m for m in maps if m.matches(labels)), None)
            if chosen is None:
                shown = ", ".join(f"{k}={labels.get(k, '')!r}" for m in maps for k in m.when)
                return f"metric '{name}' with {shown} is not mapped by profile '{self.name}'"
            if METRICS[chosen.metric].kind == "histogram" and chosen.stat is None:
                return f"'{name}' names a histogram family; expected its _bucket, _sum or _count samples"
            return Target(mapping=chosen, stat=chosen.stat, inputs=inputs)
        if inputs:
            return Target(inputs=inputs)
        for suffix, stat in zip(HISTOGRAM_PARTS, STATS, strict=True):
            base = name[: -len(suffix)]
            if name.endswith(suffix) and base in self.metrics:
                chosen = next((m for m in self.metrics[base] if m.matches(labels)), None)
                if chosen is not None and METRICS[chosen.metric].kind == "histogram" and chosen.stat is None:
                    return Target(mapping=chosen, stat=stat)
        counter = name[: -len(COUNTER_SUFFIX)]
        if name.endswith(COUNTER_SUFFIX) and counter in self.metrics:
            chosen = next((m for m in self.metrics[counter] if m.matches(labels)), None)
            if chosen is not None:
                return Target(mapping=chosen, stat=chosen.stat)
        if self.ignores(name):
            return IGNORED
        if name.endswith(CREATED_SUFFIX):
            base = name[: -len(CREATED_SUFFIX)]
            if base in self.metrics or f"{base}{COUNTER_SUFFIX}" in self.metrics:
                return f"'{name}' is the creation time of counter '{base}', not a sample"
        return f"metric '{name}' is not mapped by profile '{self.name}'"
