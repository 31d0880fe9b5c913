"""Error signals whose meaning depends on the previous value: sticky codes and error counters.

A sticky code (DCGM_FI_DEV_XID_ERRORS, an Ascend error code, an AMD AFID) holds the last code until the next
one: an event is a change to a code that is not "no error"; repeats are folded. An error counter (ECC counts,
PCIe replays) counts since the exporter started: each increase is that many events, and a drop is a restart,
after which the new value is the increase (as Prometheus treats counter resets). A bitmask (a throttle-reason
mask) is a set of sticky codes, one per bit: each bit that turns on is an event (normalizers.bitmask). The
previous value comes from the same batch, or for a series' first sample from the caller's stored state. A
series never seen before has no previous value: a non-zero code, or a non-zero count, is events at that
first sample, since the errors did happen before it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
import polars as pl

from canonical.schemas import STATE_SCHEMA
from normalizers.bitmask import turned_on
from normalizers.series import canonical_json, error_class_of

if TYPE_CHECKING:
    from normalizers.ids import Ids
    from normalizers.series import Resolution

# (node, device, source, before) -> (node, device, source, value): the newest stored raw value of each
# stateful error series strictly before `before`; series never seen are simply absent.
StateLookup = Callable[[pl.DataFrame], pl.DataFrame]

_EVENT_SCHEMA = {"ts": pl.Int64, "cid": pl.UInt32, "value": pl.Float64, "n_src": pl.Int64}


LAST_SCHEMA = {"eid": pl.UInt32, "last_ts": pl.Int64, "last": pl.Float64}


def error_rows(rows: pl.DataFrame, ids: Ids, prior: StateLookup | None, last: pl.DataFrame | None = None
               ) -> tuple[pl.DataFrame, pl.DataFrame, int, pl.DataFrame | None]:
    """Event rows (ts, cid, value, n_src), state change points, the number of folded reads, and the newest
    value of each error series so far.

    `last` (from the previous batch of the same ingest) answers for series whose newest value is older
    than this batch's first sample; only the others are looked up with `prior`.
    """
    if rows.height == 0:
        return pl.DataFrame(schema=_EVENT_SCHEMA), pl.DataFrame(schema=STATE_SCHEMA), 0, last
    keys = ids.error_frame()  # row i is error series i
    # Sorted by series, then time: each series is a run of rows, so its first row, previous values and newest
    # value are positions in plain arrays (a handful of array operations, whatever the number of series).
    data = rows.select("sid", "eid", "line", "ts", "value").sort("eid", "ts", "line")
    eid, ts = data.get_column("eid").to_numpy(), data.get_column("ts").to_numpy()
    v = data.get_column("value").to_numpy()
    head = np.empty(len(eid), dtype=bool)
    head[0] = True
    np.not_equal(eid[1:], eid[:-1], out=head[1:])
    heads = np.flatnonzero(head)
    series, before = eid[heads], ts[heads]
    newest = _Newest.of(last, len(keys))
    cached = newest.known[series] & (newest.ts[series] < before)
    prior_v = np.where(cached, newest.value[series], np.nan)
    has_prior = cached.copy()
    ask = ~cached
    if prior is not None and ask.any():
        asked = keys[series[ask]].with_columns(before=pl.Series(before[ask]),
                                                at=pl.Series(np.flatnonzero(ask)))
        known = prior(asked.select("node", "device", "source", "before"))
        got = asked.join(known, on=["node", "device", "source"], how="inner")
        at = got.get_column("at").to_numpy()
        prior_v[at] = got.get_column("value").cast(pl.Float64).to_numpy()
        has_prior[at] = True
    prev = np.empty_like(v)
    prev[1:] = v[:-1]
    prev[heads] = prior_v
    known_prev = ~head
    known_prev[heads] = has_prior
    changed = ~known_prev | (v != prev)
    delta = np.where(~known_prev | (v < prev), v, v - prev)
    sticky = keys.get_column("sticky").to_numpy()[eid]
    event = np.where(sticky, changed & (v != 0), delta > 0)
    is_mask = keys.get_column("bitmask").to_numpy()[eid]
    bits = np.zeros(len(eid), dtype=np.uint64)
    if is_mask.any():
        bits = turned_on(is_mask, v, prev, known_prev)
        event = np.where(is_mask, bits != 0, event)
    changes = pl.concat([keys.select("node", "device", "source")[eid[changed]],
                         pl.DataFrame({"ts": ts[changed], "value": v[changed]})], how="horizontal")
    hits = data.filter(pl.Series(event)).with_columns(delta=pl.Series(delta[event]),
                                                      sticky=pl.Series(sticky[event]), bits=pl.Series(bits[event]))
    tail = np.append(heads[1:] - 1, len(eid) - 1)
    newest.update(eid[tail], ts[tail], v[tail])
    return _events(hits, ids), changes, data.height - hits.height, newest.frame()


class _Newest:
    """The newest raw value of each error series, in arrays indexed by error series id."""

    def __init__(self, width: int):
        self.known = np.zeros(width, dtype=bool)
        self.ts = np.zeros(width, dtype=np.int64)
        self.value = np.zeros(width, dtype=np.float64)

    @classmethod
    def of(cls, frame: pl.DataFrame | None, width: int) -> _Newest:
        """From a LAST_SCHEMA frame (None: nothing known yet)."""
        out = cls(width)
        if frame is not None and frame.height:
            at = frame.get_column("eid").to_numpy()
            out.known[at] = True
            out.ts[at] = frame.get_column("last_ts").to_numpy()
            out.value[at] = frame.get_column("last").to_numpy()
        return out

    def update(self, eid: np.ndarray, ts: np.ndarray, value: np.ndarray) -> None:
        """Take these values where they are at least as new as what is known (this batch wins a tie)."""
        take = ~self.known[eid] | (ts >= self.ts[eid])
        self.known[eid[take]] = True
        self.ts[eid[take]] = ts[take]
        self.value[eid[take]] = value[take]

    def frame(self) -> pl.DataFrame:
        """As a LAST_SCHEMA frame."""
        at = np.flatnonzero(self.known)
        return pl.DataFrame({"eid": at, "last_ts": self.ts[at], "last": self.value[at]}).cast(
            LAST_SCHEMA)  # type: ignore[arg-type]


def _events(hits: pl.DataFrame, ids: Ids) -> pl.DataFrame:
    # One incident is one event: what a device reports at one instant in one class and severity (an XID 48 and
    # the double-bit ECC counter rising in the same scrape) is one row carrying every code, not one per source.
    incidents: dict[tuple[int, str, str, str, str, str, str], _Incident] = {}
    for sid, ts, value, delta, sticky, bits in hits.select("sid", "ts", "value", "delta", "sticky", "bits").iter_rows():
        r = ids.series[sid]
        use = r.error
        assert use is not None
        if bits:
            # one event per bit; the sample is one record, so the first bit stands for it and the others for none
            for i, bit in enumerate(use.spec.bit_codes(bits)):
                cls = bit.error_class
                key = (ts, r.pool, r.node, r.device, cls.error_class, cls.severity, "")
                incidents.setdefault(key, _Incident(r)).add(bit.code, use.attributes, 1.0, int(i == 0))
            continue
        code = use.code if use.code is not None else use.spec.format_code(value)
        cls = error_class_of(use, code)
        apart = f"{code}{canonical_json(use.attributes)}" if use.apart else ""
        key = (ts, r.pool, r.node, r.device, cls.error_class, cls.severity, apart)
        incidents.setdefault(key, _Incident(r)).add(code, use.attributes, 1.0 if sticky else delta, 1)
    out: dict[str, list[object]] = {c: [] for c in _EVENT_SCHEMA}
    for (ts, *_, error_class, severity, _), found in incidents.items():
        attrs = canonical_json(dict(found.attributes, code="+".join(sorted(found.codes)), error_class=error_class,
                                    severity=severity))
        for col, item in zip(out, (ts, ids.event_id(found.first, attrs), found.count, found.sources), strict=True):
            out[col].append(item)
    return pl.DataFrame(out, schema=_EVENT_SCHEMA)


class _Incident:
    """The codes and sources of one device's events at one instant, class and severity."""

    def __init__(self, first: Resolution):
        self.first = first
        self.codes: set[str] = set()
        self.attributes: dict[str, str] = {}
        self.count = 0.0
        self.sources = 0

    def add(self, code: str, attributes: dict[str, str], count: float, sources: int) -> None:
        """Fold one source's event in; the incident counts as many as its largest source."""
        self.codes.add(code)
        self.attributes.update(attributes)
        self.count = max(self.count, count)
        self.sources += sources
