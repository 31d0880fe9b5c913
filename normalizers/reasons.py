"""Check codes of a sample and the reject reasons they stand for, spelled out only for the rejected rows."""

from __future__ import annotations

import polars as pl

from canonical.schemas import RECORD_MAX_CHARS, REJECT_SCHEMA
from canonical.timebounds import ahead_reason, too_old_reason
from canonical.timeunits import DAY_MS
from normalizers import bitmask
from normalizers.ids import Ids

# Check codes of a sample; 0 is fine, the first failed check wins.
(OK, SERIES, DUP, AHEAD, NEGATIVE_TS, NAN, INF, SENTINEL, BELOW, ABOVE, RULE_REJECT, RULE_VALUES, NOT_MASK,
 UNKNOWN_BIT, TOO_OLD) = range(15)


def spell_out(bad: pl.DataFrame, ids: Ids, max_age_days: float = 0.0) -> pl.DataFrame:
    """The reject reason of each rejected sample, spelled out from its check code."""
    if bad.height == 0:
        return pl.DataFrame(schema=REJECT_SCHEMA)
    v, name = pl.col("value"), pl.col("name")
    iso = pl.from_epoch("ts", time_unit="ms").dt.to_string("%Y-%m-%dT%H:%M:%SZ")
    bad = bad.join(ids.text_frame(), on="sid", how="left")
    if ids.masks:
        bad = bitmask.with_bit_reasons(bad, ids.series, UNKNOWN_BIT)
    rule_reject = pl.lit(None, pl.String)
    for rid, rule in enumerate(ids.rules):
        if rule.reject_values:
            texts = {float(k): f"{text} (value {k:g})" for k, text in rule.reject_values.items()}
            rule_reject = pl.when(pl.col("rule") == rid).then(
                v.replace_strict(texts, default=None, return_dtype=pl.String)).otherwise(rule_reject)
    allowed = pl.col("rule").replace_strict(
        {rid: ", ".join(f"{k:g}" for k in r.values) for rid, r in enumerate(ids.rules)}, default="",
        return_dtype=pl.String) if ids.rules else pl.lit("")
    code = pl.col("code")
    reason = (
        pl.when(code == SERIES).then(pl.col("sreason"))
        .when(code == DUP).then(pl.lit("duplicate series in one scrape: same series and timestamp as an "
                                       "earlier line"))
        .when(code == AHEAD).then(ahead_reason("timestamp", iso))
        .when(code == NEGATIVE_TS).then(pl.format("negative timestamp {}", pl.col("ts")))
        .when(code == TOO_OLD).then(too_old_reason("timestamp", iso, round(max_age_days * DAY_MS)))
        .when(code == NAN).then(pl.lit("value is NaN"))
        .when(code == INF).then(pl.format("value is {}", pl.when(v > 0).then(pl.lit("+Inf")).otherwise(pl.lit("-Inf"))))
        .when(code == SENTINEL).then(pl.format("{} (value {})", pl.col("sent_reason"), v))
        .when(code == BELOW).then(pl.format("value {} is below the valid minimum {} of {}", v, pl.col("vmin"), name))
        .when(code == ABOVE).then(pl.format("value {} is above the valid maximum {} of {}", v, pl.col("vmax"), name))
        .when(code == RULE_REJECT).then(rule_reject)
        .when(code == RULE_VALUES).then(pl.format("value {} is not one of {} for {}", v, allowed, name))
    )
    if ids.masks:
        reason = reason.when(code == NOT_MASK).then(bitmask.not_mask_reason()).when(
            code == UNKNOWN_BIT).then(pl.col("bit_reason"))
    return records(bad.with_columns(reason=reason.otherwise(pl.lit("rejected"))))


def records(bad: pl.DataFrame) -> pl.DataFrame:
    """Rejected samples as REJECT_SCHEMA rows: line, the record's text (or a rendering of it), reason."""
    record = pl.coalesce(
        pl.col("text").str.strip_chars_end("\r\n"),
        pl.format("{} {} {}", pl.col("sname"), pl.col("value"), pl.col("ts_ms")),
    ).str.slice(0, RECORD_MAX_CHARS)
    if "sname" not in bad.columns:
        bad = bad.with_columns(sname=pl.lit(""))
    return bad.select(pl.col("line").cast(pl.Int64), record.alias("record"), pl.col("reason").cast(pl.String))
