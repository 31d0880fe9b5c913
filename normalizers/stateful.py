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

from normalizers.canonical import ERRORS_METRIC
from normalizers.profile import STICKY
from normalizers.series import canonical_json, error_class_of

if TYPE_CHECKING:
    from normalizers.normalize import StateLookup
    from normalizers.series import Resolution

STATE_SCHEMA = {"node": pl.String, "device": pl.String, "source": pl.String, "ts": pl.Int64, "value": pl.Float64}
_EVENT_SCHEMA = {"ts": pl.Int64, "pool": pl.String, "node": pl.String, "device": pl.String, "metric": pl.String,
                 "value": pl.Float64, "attributes": pl.String, "n_src": pl.Int64}


def error_rows(rows: pl.DataFrame, res: dict[str, Resolution], prior: StateLookup | None
               ) -> tuple[pl.DataFrame, pl.DataFrame, int]:
    """Event rows, state change points and the number of folded reads for the valid error samples."""
    if rows.height == 0:
        return pl.DataFrame(schema=_EVENT_SCHEMA), pl.DataFrame(schema=STATE_SCHEMA), 0
    info = [(k, r.error.source, r.error.spec.kind == STICKY, [float(c) for c in r.error.spec.no_error
                                                               if _is_number(c)])
            for k, r in res.items() if r.error is not None]
    table = pl.DataFrame(info, orient="row", schema={
        "key": pl.String, "source": pl.String, "sticky": pl.Boolean, "no_error": pl.List(pl.Float64),
    }).with_columns(pl.col("key").cast(pl.Categorical))
    group = ["node", "device", "source"]
    data = rows.select("key", "line", "ts", "value", "pool", "node", "device").join(table, on="key").sort(
        [*group, "ts", "line"])
    before = data.group_by(group).agg(pl.col("ts").min().alias("before"))
    if prior is not None:
        known = prior(before).select(*group, pl.col("value").cast(pl.Float64).alias("prior"))
        data = data.join(known, on=group, how="left")
    else:
        data = data.with_columns(prior=pl.lit(None, pl.Float64))
    v = pl.col("value")
    data = data.with_columns(prev=pl.coalesce(v.shift(1).over(group), pl.col("prior"))).with_columns(
        changed=pl.col("prev").is_null() | (v != pl.col("prev")),
        delta=pl.when(pl.col("prev").is_null() | (v < pl.col("prev"))).then(v).otherwise(v - pl.col("prev")),
    ).with_columns(
        event=pl.when(pl.col("sticky"))
        .then(pl.col("changed") & pl.col("no_error").list.contains(v).not_())
        .otherwise(pl.col("delta") > 0),
    )
    state = data.filter(pl.col("changed")).select(*group, "ts", "value")
    hits = data.filter(pl.col("event"))
    events = _events(hits, res)
    return events, state, data.height - hits.height


def _events(hits: pl.DataFrame, res: dict[str, Resolution]) -> pl.DataFrame:
    out: dict[str, list[object]] = {c: [] for c in _EVENT_SCHEMA}
    for key, ts, pool, node, device, value, delta, sticky in hits.select(
            pl.col("key").cast(pl.String), "ts", "pool", "node", "device", "value", "delta", "sticky").iter_rows():
        use = res[key].error
        assert use is not None
        code = use.code if use.code is not None else use.spec.format_code(value)
        cls = error_class_of(use, code)
        attrs = dict(use.attributes, code=code, error_class=cls.error_class, severity=cls.severity)
        for col, item in zip(out, (ts, pool, node, device, ERRORS_METRIC, 1.0 if sticky else delta,
                                   canonical_json(attrs), 1), strict=True):
            out[col].append(item)
    return pl.DataFrame(out, schema=_EVENT_SCHEMA)


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True
