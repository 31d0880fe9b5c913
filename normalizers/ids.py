"""Small integer ids for what repeats across samples: series, canonical rows, derived groups, error series.

Samples carry these ids through the vectorized steps; the strings behind them are joined in once, at the end.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from canonical.metrics import ERRORS_METRIC
from canonical.schemas import DEVICE_WIDE
from normalizers.bitmask import unknown_bits
from normalizers.profile import BITMASK, DEVICE, STICKY, Derived, ValueRule
from normalizers.series import Resolution

RowKey = tuple[str, str, str, str, str]  # pool, node, device, metric, attributes
# Roles of a series: what its samples become (a rejected series, its own canonical row, an input, an error,
# nothing: a metric the profile ignores).
REJECTED, DIRECT, INPUT, ERROR, IGNORED = 0, 1, 2, 3, 4

_SERIES_SCHEMA = {
    "sid": pl.UInt32, "role": pl.Int8, "cid": pl.UInt32, "did": pl.UInt32, "inp": pl.UInt8,
    "consumed": pl.Boolean, "scale": pl.Float64, "vmin": pl.Float64, "vmax": pl.Float64,
    "sentinel": pl.Float64, "rule": pl.Int32, "eid": pl.UInt32, "unknown_bits": pl.UInt64,
}


@dataclass
class _DerivedGroup:
    derived: Derived
    names: tuple[str, ...]


@dataclass
class Ids:
    """Registries of one ingest; frames are rebuilt only when something new was registered."""

    series: list[Resolution] = field(default_factory=list)
    rules: list[ValueRule] = field(default_factory=list)
    canon: dict[RowKey, int] = field(default_factory=dict)
    derived: dict[int, _DerivedGroup] = field(default_factory=dict)
    error_keys: dict[tuple[str, str, str], int] = field(default_factory=dict)
    # True once two series (or a series and a derived group) produce rows of the same canonical id: then a
    # batch's rows need deduplicating on (canonical id, ts); until then they are unique by construction
    shared: bool = False
    produced: set[int] = field(default_factory=set)  # canonical ids that series or derived groups produce
    parts: set[int] = field(default_factory=set)  # canonical ids of series that describe one part of a device
    ignoring: bool = False  # a series whose samples the profile ignores was registered
    masks: bool = False     # a bitmask error series was registered
    _rows: dict[str, list[object]] = field(default_factory=lambda: {c: [] for c in _SERIES_SCHEMA})
    _cache: dict[str, pl.DataFrame] = field(default_factory=dict)

    def canonical(self, key: RowKey) -> int:
        """The id of a canonical row identity (pool, node, device, metric, attributes)."""
        got = self.canon.get(key)
        if got is None:
            got = self.canon[key] = len(self.canon)
            self._cache.pop("canonical", None)
        return got

    def _rule(self, rule: ValueRule) -> int | None:
        if not rule.reject_values and not rule.values:
            return None
        if rule not in self.rules:
            self.rules.append(rule)
        return self.rules.index(rule)

    def add_series(self, r: Resolution) -> int:
        """Register a resolved series; returns its id."""
        sid = len(self.series)
        self.series.append(r)
        role = REJECTED if r.reason else {"input": INPUT, "error": ERROR, "ignored": IGNORED}.get(r.kind, DIRECT)
        self.ignoring = self.ignoring or role == IGNORED
        cid = self.canonical((r.pool, r.node, r.device, r.metric, r.attributes)) if r.metric and not r.reason \
            else None
        if cid is not None and role == DIRECT:
            self._produce(cid)
            if not r.device_wide:
                self._part(cid)
        did = inp = None
        consumed = False
        if r.derived and not r.reason:
            use = r.derived[0]
            did = self.canonical((r.pool, r.node, r.device, use.derived.metric, use.attributes))
            if did not in self.derived:
                self._produce(did)
                if use.derived.scope != DEVICE:
                    self._part(did)
            self.derived.setdefault(did, _DerivedGroup(use.derived, use.derived.inputs))
            inp = use.derived.inputs.index(use.name)
            consumed = use.consumed_only
        eid = mask = None
        if r.error is not None and not r.reason:
            key = (r.node, r.device, r.error.source)
            eid = self.error_keys.setdefault(key, len(self.error_keys))
            if r.error.spec.kind == BITMASK:
                mask, self.masks = unknown_bits(r.error.spec), True
        sentinel = min((s.at_or_above for s in r.sentinels), default=None)
        values = (sid, role, cid, did, inp, consumed, r.scale, r.rule.min, r.rule.max, sentinel, self._rule(r.rule),
                  eid, mask)
        for column, value in zip(self._rows, values, strict=True):
            self._rows[column].append(value)
        self._cache.clear()
        return sid

    def _part(self, cid: int) -> None:
        self.parts.add(cid)
        self._cache.pop("canonical", None)

    def _produce(self, cid: int) -> None:
        if cid in self.produced:
            self.shared = True
        self.produced.add(cid)

    def series_frame(self) -> pl.DataFrame:
        """Row i: role, canonical id, derived group, scale, valid range, sentinel, rule, error id of series i."""
        if "series" not in self._cache:
            self._cache["series"] = pl.DataFrame(self._rows, schema=_SERIES_SCHEMA)
        return self._cache["series"]

    def text_frame(self) -> pl.DataFrame:
        """Per series: the names and reasons used to spell out rejects."""
        if "text" not in self._cache:
            sentinel = [min(r.sentinels, key=lambda s: s.at_or_above).reason if r.sentinels else None
                        for r in self.series]
            self._cache["text"] = pl.DataFrame({
                "sid": pl.Series(range(len(self.series)), dtype=pl.UInt32),
                "name": [r.name for r in self.series], "sname": [r.name for r in self.series],
                "sreason": [r.reason for r in self.series], "sent_reason": sentinel,
            }, schema_overrides={"sreason": pl.String, "sent_reason": pl.String})
        return self._cache["text"]

    def canonical_frame(self) -> pl.DataFrame:
        """Row i: pool, node, device, metric, attributes (dictionary-encoded text) and device_wide of canonical id i."""
        if "canonical" not in self._cache:
            keys = list(self.canon)  # in id order: row i is canonical id i
            columns = ("pool", "node", "device", "metric", "attributes")
            self._cache["canonical"] = pl.DataFrame(
                {**{c: [k[i] for k in keys] for i, c in enumerate(columns)},
                 DEVICE_WIDE: [cid not in self.parts for cid in range(len(keys))]},
                schema={**{c: pl.Categorical for c in columns}, DEVICE_WIDE: pl.Boolean})
        return self._cache["canonical"]

    def derived_frame(self) -> pl.DataFrame:
        """Per derived group: how many distinct inputs it needs, the unit factor of their sum and whether it is the
        ratio of its first input to its second instead."""
        if "derived" not in self._cache:
            self._cache["derived"] = self._derived_frame()
        return self._cache["derived"]

    def _derived_frame(self) -> pl.DataFrame:
        dids = list(self.derived)
        return pl.DataFrame({"did": pl.Series(dids, dtype=pl.UInt32),
                             "need": pl.Series([len(self.derived[d].names) for d in dids], dtype=pl.UInt32),
                             "factor": [self.derived[d].derived.factor for d in dids],
                             "ratio": pl.Series([self.derived[d].derived.ratio for d in dids], dtype=pl.Boolean)},
                            schema_overrides={"factor": pl.Float64})

    def missing_text(self, did: int, sid: int, present: list[int]) -> str:
        """Why a consumed-only input is rejected: which partners were missing at its timestamp."""
        group = self.derived[did]
        lacking = [n for i, n in enumerate(group.names) if i not in present]
        return (f"{self.series[sid].name} feeds only {group.derived.metric}, which also needs "
                f"{', '.join(lacking)} at the same time")

    def error_frame(self) -> pl.DataFrame:
        """Per error series id: its state key, whether it is a sticky code or a bitmask (row i is error series i)."""
        if "errors" not in self._cache:
            self._cache["errors"] = self._error_frame()
        return self._cache["errors"]

    def _error_frame(self) -> pl.DataFrame:
        keys = list(self.error_keys)
        sticky, bitmask = {}, {}
        for r in self.series:
            if r.error is not None and not r.reason:
                eid = self.error_keys[(r.node, r.device, r.error.source)]
                sticky[eid], bitmask[eid] = r.error.spec.kind == STICKY, r.error.spec.kind == BITMASK
        return pl.DataFrame({
            "eid": pl.Series(list(self.error_keys.values()), dtype=pl.UInt32),
            "node": [k[0] for k in keys], "device": [k[1] for k in keys], "source": [k[2] for k in keys],
            "sticky": [sticky[e] for e in self.error_keys.values()],
            "bitmask": [bitmask[e] for e in self.error_keys.values()],
        }, schema_overrides={"node": pl.String, "device": pl.String, "source": pl.String, "sticky": pl.Boolean,
                             "bitmask": pl.Boolean})

    def event_id(self, r: Resolution, attributes: str) -> int:
        """Canonical id of an error event row of a series."""
        return self.canonical((r.pool, r.node, r.device, ERRORS_METRIC, attributes))

    def versions_frame(self) -> pl.DataFrame:
        """Per series with version labels: pool, node, device ('' for node-wide), component, version."""
        if "versions" not in self._cache:
            rows = [(sid, r.pool, r.node, r.device if per_device else "", component, version)
                    for sid, r in enumerate(self.series) if not r.reason
                    for component, version, per_device in r.versions]
            self._cache["versions"] = pl.DataFrame(rows, orient="row", schema={
                "sid": pl.UInt32, "pool": pl.String, "node": pl.String, "device": pl.String, "component": pl.String,
                "version": pl.String})
        return self._cache["versions"]
