"""Error signals whose meaning depends on the previous value: sticky codes and error counters.

A sticky code (DCGM_FI_DEV_XID_ERRORS, an Ascend error code, an AMD AFID) holds the last code until the next
one: an event is a change to a code that is not "no error"; repeats are folded. An error counter (ECC counts,
PCIe replays) counts since the exporter started: each increase is that many events, and a drop is a restart,
after which the new value is the increase (as Prometheus treats counter resets). The previous value comes
from the same batch, or for a series' first sample from the caller's stored state. A series never seen
before has no previous value: a non-zero code, or a non-zero count, is events at that first sample, since
the errors did happen before it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import polars as pl

from normalizers.series import canonical_json, error_class_of

if TYPE_CHECKING:
    from normalizers.ids import Ids
    from normalizers.normalize import StateLookup

STATE_SCHEMA = {"node": pl.String, "device": pl.String, "source": pl.String, "ts": pl.Int64, "value": pl.Float64}
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
    # sorted by series, then time: a series' first row and previous value are found by shifting, not grouping
    data = rows.select("sid", "eid", "line", "ts", "value").sort("eid", "ts", "line")
    data = data.with_columns(sticky=keys.get_column("sticky").gather(data.get_column("eid")),
                             head=pl.col("eid").ne_missing(pl.col("eid").shift(1)))
    before = data.filter("head").select("eid", pl.col("ts").alias("before"))
    if last is not None:
        before = before.join(last, on="eid", how="left")
    else:
        before = before.with_columns(last_ts=pl.lit(None, pl.Int64), last=pl.lit(None, pl.Float64))
    cached = before.filter(pl.col("last_ts") < pl.col("before")).select("eid", pl.col("last").alias("prior"))
    ask = before.filter(pl.col("last_ts").is_null() | (pl.col("last_ts") >= pl.col("before")))
    found = [cached]
    if prior is not None and ask.height:
        ask = ask.join(keys, on="eid")
        known = prior(ask.select("node", "device", "source", "before"))
        found.append(ask.join(known, on=["node", "device", "source"], how="inner").select(
            "eid", pl.col("value").cast(pl.Float64).alias("prior")))
    data = data.join(pl.concat(found), on="eid", how="left", maintain_order="left")
    v, prev = pl.col("value"), pl.col("prev")
    data = data.with_columns(prev=pl.when(pl.col("head")).then(pl.col("prior")).otherwise(v.shift(1))).with_columns(
        changed=prev.is_null() | (v != prev),
        delta=pl.when(prev.is_null() | (v < prev)).then(v).otherwise(v - prev),
    ).with_columns(
        event=pl.when(pl.col("sticky")).then(pl.col("changed") & (v != 0)).otherwise(pl.col("delta") > 0),
    )
    changed = data.filter(pl.col("changed"))
    changes = pl.concat([keys.select("node", "device", "source")[changed.get_column("eid")],
                         changed.select("ts", "value")], how="horizontal")
    hits = data.filter(pl.col("event"))
    newest = data.filter(pl.col("eid").ne_missing(pl.col("eid").shift(-1))).select(
        "eid", pl.col("ts").alias("last_ts"), pl.col("value").alias("last"))
    if last is not None:
        newest = pl.concat([last, newest.cast(LAST_SCHEMA)]).sort("last_ts").unique("eid", keep="last")  # type: ignore[arg-type]
    return _events(hits, ids), changes, data.height - hits.height, newest.cast(LAST_SCHEMA)  # type: ignore[arg-type]


def _events(hits: pl.DataFrame, ids: Ids) -> pl.DataFrame:
    out: dict[str, list[object]] = {c: [] for c in _EVENT_SCHEMA}
    for sid, ts, value, delta, sticky in hits.select("sid", "ts", "value", "delta", "sticky").iter_rows():
        r = ids.series[sid]
        use = r.error
        assert use is not None
        code = use.code if use.code is not None else use.spec.format_code(value)
        cls = error_class_of(use, code)
        attrs = canonical_json(dict(use.attributes, code=code, error_class=cls.error_class, severity=cls.severity))
        for col, item in zip(out, (ts, ids.event_id(r, attrs), 1.0 if sticky else delta, 1), strict=True):
            out[col].append(item)
    return pl.DataFrame(out, schema=_EVENT_SCHEMA)
