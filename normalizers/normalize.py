"""Raw samples -> canonical rows, rejects, versions and error-state change points, vectorized per batch.

Every sample read ends in exactly one place: a canonical row (counted by the row's `n_src`), a reject with
its reason, `folded` (a repeat of a sticky error code, an unchanged error counter, or a second sample of
the same canonical row), or `ignored` (a metric the profile's `ignore` names). Each distinct series is
resolved once (`series.resolve`) and gets small integer ids; the per-sample work is integer and float
expressions over the batch, and reject reasons are only spelled out for the rejected rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from canonical.schemas import DEVICE_WIDE, REJECT_SCHEMA, VERSION_SCHEMA
from canonical.timebounds import DEFAULT_MAX_AGE_DAYS, MAX_AHEAD_MS
from canonical.timeunits import DAY_MS
from normalizers import bitmask
from normalizers.exposition import RawBatch
from normalizers.ids import DIRECT, ERROR, IGNORED, REJECTED, Ids
from normalizers.reasons import (
    ABOVE,
    AHEAD,
    BELOW,
    DUP,
    INF,
    NAN,
    NEGATIVE_TS,
    NOT_MASK,
    OK,
    RULE_REJECT,
    RULE_VALUES,
    SENTINEL,
    SERIES,
    TOO_OLD,
    UNKNOWN_BIT,
    records,
    spell_out,
)
from normalizers.series import Context, resolve
from normalizers.stateful import StateLookup, error_rows
from normalizers.textformat import render_series

# Text columns are Categorical: few distinct values per batch, and the store keeps them dictionary-encoded.
ROW_SCHEMA: dict[str, pl.DataType] = {
    "ts": pl.Int64(), "pool": pl.Categorical(), "node": pl.Categorical(), "device": pl.Categorical(),
    "metric": pl.Categorical(), "value": pl.Float64(), "attributes": pl.Categorical(), "n_src": pl.Int64(),
    DEVICE_WIDE: pl.Boolean(),
}




@dataclass(frozen=True)
class Options:
    """Clock-related inputs: the timestamp of samples without one, and now for the future check."""

    default_ts_ms: int
    now_ms: int
    max_ahead_ms: int = MAX_AHEAD_MS
    # older than this is a truncated or mis-scaled timestamp, not history (and would spread one run's rollup
    # refresh over decades)
    max_age_ms: int = DEFAULT_MAX_AGE_DAYS * DAY_MS


@dataclass
class Normalized:
    """Output of one batch."""

    samples: pl.DataFrame   # ROW_SCHEMA, unique on (ts, pool, node, device, metric, attributes)
    rejects: pl.DataFrame   # line, record, reason
    versions: pl.DataFrame  # VERSION_SCHEMA, one row per observation (first and last seen are aggregated)
    folded: int             # reads that carry no new information
    state: pl.DataFrame     # STATE_SCHEMA: change points of stateful error series
    ignored: int = 0        # reads of metrics the profile ignores: neither stored nor rejected


class Normalizer:
    """Caches each series' resolution and ids across the batches of one ingest; otherwise pure."""

    def __init__(self, ctx: Context, options: Options):
        self.ctx = ctx
        self.options = options
        self.ids = Ids()
        self._sid: dict[str, int] = {}
        self._by_series: dict[str, int] = {}
        self._code_sid = np.full(0, -1, dtype=np.int64)  # dictionary code of a key -> series id, -1 unknown
        self._last: pl.DataFrame | None = None  # newest raw value of each error series in this ingest

    def mark(self) -> pl.DataFrame | None:
        """What carries over between batches, so that a batch can be normalized again from the same point."""
        return self._last

    def reset(self, mark: pl.DataFrame | None) -> None:
        """Go back to a `mark` (series resolutions are kept: they do not depend on the data)."""
        self._last = mark

    def sid(self, key: str, name: str, labels: dict[str, str]) -> int:
        """The series id of a key, resolving the series the first time it is seen."""
        got = self._sid.get(key)
        if got is None:
            # the same series written differently (label order, spacing, escapes) is the same series
            same = render_series(name, labels)
            got = self._by_series.get(same)
            if got is None:
                got = self._by_series[same] = self.ids.add_series(resolve(self.ctx, name, labels))
            self._sid[key] = got
        return got

    # -- entry points ----------------------------------------------------------------------------
    def normalize(self, batch: RawBatch, prior: StateLookup | None = None) -> Normalized:
        """Normalize one batch of whole scrapes; `prior` supplies stored error state (none: every series is new).

        Sources cut their batches on whole scrapes (collectors.sources), so the inputs of a derived row are
        always in the batch that needs them: an incomplete group is rejected here, not held.
        """
        key = batch.samples.get_column("key")
        if key.dtype != pl.Categorical:
            key = key.cast(pl.Categorical)
        sid = self._sids(key, batch.series)
        return self._run(batch.samples.drop("key").with_columns(sid=pl.Series(sid, dtype=pl.UInt32)), prior)

    def _sids(self, key: pl.Series, series: dict[str, tuple[str, dict[str, str]]]) -> np.ndarray:
        """Series id per sample, by the key's dictionary code; only codes not seen before are resolved."""
        codes = key.to_physical().to_numpy()
        if not len(codes):
            return codes
        top = int(codes.max()) + 1
        if len(self._code_sid) < top:
            grown = np.full(max(top, 2 * len(self._code_sid)), -1, dtype=np.int64)
            grown[:len(self._code_sid)] = self._code_sid
            self._code_sid = grown
        sid = self._code_sid[codes]
        if (sid < 0).any():
            unseen = key.filter(pl.Series(sid < 0)).unique()
            for code, k in zip(unseen.to_physical().to_list(), unseen.cast(pl.String).to_list(), strict=True):
                self._code_sid[code] = self.sid(k, *series[k])
            sid = self._code_sid[codes]
        return sid

    # -- the batch ------------------------------------------------------------------------------
    def _codes(self) -> pl.Expr:
        v, o = pl.col("value"), self.options
        expr: Any = (
            pl.when(pl.col("role") == REJECTED).then(SERIES)
            .when(pl.col("dup")).then(DUP)
            .when(pl.col("ts") > o.now_ms + o.max_ahead_ms).then(AHEAD)
            .when(pl.col("ts") < 0).then(NEGATIVE_TS)
            .when(pl.col("ts") < o.now_ms - o.max_age_ms).then(TOO_OLD)
            .when(v.is_nan()).then(NAN)
            .when(v.is_infinite()).then(INF)
            .when(v >= pl.col("sentinel")).then(SENTINEL)
        )
        # a value the profile names ("-1 means not supported") is reported as such, before any range check
        for rid, rule in enumerate(self.ids.rules):
            if rule.reject_values:
                expr = expr.when((pl.col("rule") == rid) & v.is_in(list(rule.reject_values))).then(RULE_REJECT)
        expr = expr.when(v < pl.col("vmin")).then(BELOW).when(v > pl.col("vmax")).then(ABOVE)
        for rid, rule in enumerate(self.ids.rules):
            if rule.values:
                expr = expr.when((pl.col("rule") == rid) & v.is_in(list(rule.values)).not_()).then(RULE_VALUES)
        if self.ids.masks:
            expr = bitmask.checks(expr, NOT_MASK, UNKNOWN_BIT)
        return expr.otherwise(OK).cast(pl.Int8)

    def _remap(self) -> pl.Expr:
        v = pl.col("value")
        expr: Any = pl.when(pl.lit(False)).then(v)
        for rid, rule in enumerate(self.ids.rules):
            if rule.values:
                expr = expr.when(pl.col("rule") == rid).then(v.replace_strict(rule.values, default=v))
        return expr.otherwise(v)

    def _run(self, samples: pl.DataFrame, prior: StateLookup | None) -> Normalized:
        table = self.ids.series_frame()
        frame = pl.concat([samples, table.drop("sid")[samples.get_column("sid")]], how="horizontal").with_columns(
            ts=pl.col("ts_ms").fill_null(self.options.default_ts_ms))
        ignored, info = 0, frame.clear()
        if self.ids.ignoring:  # dropped before any check: an ignored metric is never a reject, whatever its value
            keep = frame.get_column("role") != IGNORED
            ignored = frame.height - int(keep.sum())
            info = frame.filter(~keep) if ignored else info
            frame = frame.filter(keep) if ignored else frame
        dup = pl.lit(False) if _pairs_distinct(frame, "sid") else _first_of_pair(frame, "sid", "ts").not_()
        frame = (
            frame.lazy()
            .with_columns(dup=dup)
            .with_columns(code=self._codes())
            .with_columns(value=self._remap() if any(r.values for r in self.ids.rules) else pl.col("value"))
            .collect()
        )
        # filters run lazily, so that only the columns each part needs are copied
        bad = frame.lazy().filter(pl.col("code") != OK).collect()
        good = frame if bad.height == 0 else frame.filter(pl.col("code") == OK)
        rejects = [spell_out(bad, self.ids, self.options.max_age_ms / DAY_MS)]
        rows = [good.lazy().filter(pl.col("role") == DIRECT).select(
            "ts", "cid", (pl.col("value") * pl.col("scale")).alias("value"), pl.lit(1, pl.Int64).alias("n_src"))
            .collect()]
        derived, left = _derived(good, self.ids)
        rows.append(derived)
        rejects.append(left)
        errors = good.lazy().filter(pl.col("role") == ERROR).select("sid", "eid", "line", "ts", "value").collect()
        events, state, folded, self._last = error_rows(errors, self.ids, prior, self._last)
        rows.append(events)
        out = pl.concat([r.cast({"cid": pl.UInt32, "value": pl.Float64, "n_src": pl.Int64}) for r in rows])
        # rows are unique by construction unless two producers share a canonical id, or events meet each other
        # or another producer's rows
        shared = self.ids.shared or (events.height > 0 and (
            not self.ids.produced.isdisjoint(events.get_column("cid").unique().to_list())
            or events.select("cid", "ts").is_duplicated().any()))
        unique = out.filter(_first_of_pair(out, "cid", "ts")) if shared else out
        folded += int(out.get_column("n_src").sum()) - int(unique.get_column("n_src").sum())
        canon = self.ids.canonical_frame()[unique.get_column("cid")]
        samples_out = pl.concat([unique, canon], how="horizontal").select(list(ROW_SCHEMA))
        seen = good.select("sid", "ts") if info.height == 0 else pl.concat([good.select("sid", "ts"),
                                                                             info.select("sid", "ts")])
        return Normalized(samples_out, pl.concat(rejects), _versions(seen, self.ids), folded, state, ignored)


def _pairs_distinct(frame: pl.DataFrame, small: str) -> bool:
    """True when no (small id, ts) pair repeats, told without hashing when ts never decreases (a file of
    scrapes in time order); False when that cannot be told cheaply."""
    if frame.height < 2:
        return True
    ts = frame.get_column("ts").to_numpy()
    step = np.diff(ts)
    if (step < 0).any():
        return False
    runs = np.empty(len(ts), dtype=np.int64)
    runs[0] = 0
    np.cumsum(step != 0, out=runs[1:])
    ids = frame.get_column(small).to_numpy()
    width = int(ids.max()) + 1
    if (int(runs[-1]) + 1) * width > 4 * len(ts) + 1024:  # too sparse to count in an array
        return False
    return int(np.bincount(runs * width + ids).max()) <= 1


def _first_of_pair(frame: pl.DataFrame, small: str, ts: str) -> pl.Expr:
    """True for the first row of each (small id, timestamp) pair.

    The pair is folded into one Int64 when that cannot overflow (twice as fast to hash as a struct).
    """
    if frame.height == 0:
        return pl.lit(True)
    lo, hi = frame.get_column(ts).min(), frame.get_column(ts).max()
    top = frame.get_column(small).max()
    if isinstance(lo, int) and isinstance(hi, int) and isinstance(top, int) and (hi - lo + 1) * (top + 1) < 2**62:
        return ((pl.col(ts) - lo) * (top + 1) + pl.col(small).cast(pl.Int64)).is_first_distinct()
    return pl.struct(small, ts).is_first_distinct()


def _derived(good: pl.DataFrame, ids: Ids) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Rows computed from several inputs (memory total = used + free + reserved), and the rejects of groups
    that are not complete (their consumed-only inputs)."""
    cols = ["line", "sid", "ts", "ts_ms", "value", "text", "did", "inp", "consumed"]
    inputs = good.lazy().filter(pl.col("did").is_not_null()).select(cols).collect()
    empty = pl.DataFrame(schema={"ts": pl.Int64, "cid": pl.UInt32, "value": pl.Float64, "n_src": pl.Int64})
    if inputs.height == 0:
        return empty, pl.DataFrame(schema=REJECT_SCHEMA)
    summed = inputs.group_by("did", "ts").agg(
        pl.col("value").sum().alias("total"), pl.col("inp").n_unique().alias("have"),
        pl.col("consumed").sum().cast(pl.Int64).alias("n_src"),
        pl.col("value").filter(pl.col("inp") == 0).sum().alias("num"),
        pl.col("value").filter(pl.col("inp") == 1).sum().alias("den"))
    info = ids.derived_frame()
    summed = summed.join(info, on="did", how="left")
    # a ratio over nothing (no prefix-cache query yet) has no value: its inputs are rejected, never a number
    undefined = pl.col("ratio") & (pl.col("den") <= 0)
    complete = summed.filter((pl.col("have") == pl.col("need")) & ~undefined).select(
        "ts", pl.col("did").alias("cid"),
        (pl.when(pl.col("ratio")).then(pl.col("num") / pl.col("den")).otherwise(pl.col("total"))
         * pl.col("factor")).alias("value"), "n_src")
    partial = summed.filter(pl.col("have") != pl.col("need")).select("did", "ts")
    empty = summed.filter((pl.col("have") == pl.col("need")) & undefined).select("did", "ts")
    rejects = [pl.DataFrame(schema=REJECT_SCHEMA)]
    if partial.height:
        rejects.append(_derived_leftovers(inputs.join(partial, on=["did", "ts"], how="semi"), ids))
    if empty.height:
        left = inputs.join(empty, on=["did", "ts"], how="semi").filter(pl.col("consumed"))
        reasons = [f"{ids.derived[did].derived.metric} is a ratio over {ids.derived[did].names[1]} = 0: no value yet"
                   for did in left.get_column("did").to_list()]
        rejects.append(records(left.join(ids.text_frame(), on="sid", how="left").with_columns(
            reason=pl.Series(reasons, dtype=pl.String))))
    return complete, pl.concat(rejects) if len(rejects) > 1 else rejects[0]


def _derived_leftovers(waiting: pl.DataFrame, ids: Ids) -> pl.DataFrame:
    """Consumed-only inputs of groups that will never be complete: rejected, naming what was missing."""
    left = waiting.filter(pl.col("consumed"))
    if left.height == 0:
        return pl.DataFrame(schema=REJECT_SCHEMA)
    present = waiting.group_by("did", "ts").agg(pl.col("inp").unique().sort().alias("present"))
    left = left.join(present, on=["did", "ts"], how="left")
    reasons = [ids.missing_text(did, sid, present) for did, sid, present in left.select(
        "did", "sid", "present").iter_rows()]
    return records(left.join(ids.text_frame(), on="sid", how="left").with_columns(
        reason=pl.Series(reasons, dtype=pl.String)))


def _versions(good: pl.DataFrame, ids: Ids) -> pl.DataFrame:
    table = ids.versions_frame()
    if table.height == 0:
        return pl.DataFrame(schema=VERSION_SCHEMA)
    # first and last timestamp per series id, in arrays indexed by id (no hashing)
    sid, ts = good.get_column("sid").to_numpy(), good.get_column("ts").to_numpy()
    first = np.full(len(ids.series), np.iinfo(np.int64).max)
    last = np.full(len(ids.series), np.iinfo(np.int64).min)
    np.minimum.at(first, sid, ts)
    np.maximum.at(last, sid, ts)
    at = table.get_column("sid").to_numpy()
    joined = table.with_columns(first=pl.Series(first[at]), last=pl.Series(last[at])).filter(
        pl.Series(last[at] >= first[at]))  # series seen in this batch
    return pl.concat([joined.select(*list(VERSION_SCHEMA)[:-1], pl.col(c).alias("ts")) for c in ("first", "last")])

