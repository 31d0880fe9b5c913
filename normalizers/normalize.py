"""Raw samples -> canonical rows, rejects, versions and error-state change points, vectorized per batch.

Every sample read ends in exactly one place: a canonical row (counted by the row's `n_src`), a reject with
its reason, or `folded` (a repeat of a sticky error code or an unchanged error counter). Each distinct series
is resolved once (`series.resolve`); the per-sample work is Polars expressions over the whole batch.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import polars as pl

from normalizers.exposition import RECORD_CHARS, REJECT_SCHEMA, RawBatch
from normalizers.profile import ValueRule
from normalizers.series import Context, Resolution, resolve
from normalizers.stateful import STATE_SCHEMA, error_rows
from normalizers.textformat import render_series

DAY_MS = 86_400_000
ROW_SCHEMA: dict[str, pl.DataType] = {
    "ts": pl.Int64(), "pool": pl.String(), "node": pl.String(), "device": pl.String(), "metric": pl.String(),
    "value": pl.Float64(), "attributes": pl.String(), "n_src": pl.Int64(),
}
VERSION_SCHEMA = {"pool": pl.String, "node": pl.String, "device": pl.String, "component": pl.String,
                  "version": pl.String, "ts": pl.Int64}

# (node, device, source, before) -> (node, device, source, value): the newest stored raw value of each
# stateful error series strictly before `before`; series never seen are simply absent.
StateLookup = Callable[[pl.DataFrame], pl.DataFrame]


@dataclass(frozen=True)
class Options:
    """Clock-related inputs: the timestamp of samples without one, and now for the future check."""

    default_ts_ms: int
    now_ms: int
    max_ahead_ms: int = DAY_MS


@dataclass
class Normalized:
    """Output of one batch."""

    samples: pl.DataFrame   # ROW_SCHEMA
    rejects: pl.DataFrame   # line, record, reason
    versions: pl.DataFrame  # VERSION_SCHEMA, one row per observation (first and last seen are aggregated)
    folded: int             # reads that carry no new information (sticky repeats, unchanged counters)
    state: pl.DataFrame     # STATE_SCHEMA: change points of stateful error series


class Normalizer:
    """Stateless about data, but caches each series' resolution across batches of one ingest."""

    def __init__(self, ctx: Context, options: Options):
        self.ctx = ctx
        self.options = options
        self._cache: dict[str, Resolution] = {}
        self._rules: list[ValueRule] = []

    def resolution(self, key: str, name: str, labels: dict[str, str]) -> Resolution:
        """The cached resolution of one series."""
        got = self._cache.get(key)
        if got is None:
            got = resolve(self.ctx, name, labels)
            self._cache[key] = got
        return got

    # -- entry points ----------------------------------------------------------------------------
    def normalize(self, batch: RawBatch, prior: StateLookup | None = None) -> Normalized:
        """Normalize one parsed batch; `prior` supplies stored error state (none: every series is new)."""
        samples = batch.samples
        keys = samples.get_column("key").unique().cast(pl.String).to_list()
        res = {k: self.resolution(k, *batch.series[k]) for k in keys}
        return self._run(samples, res, prior)

    def normalize_frame(self, frame: pl.DataFrame, prior: StateLookup | None = None) -> Normalized:
        """Normalize already-parsed raw samples: name, labels (list of {name, value}), value, ts_ms[, line].

        This is the path for sources that are not exposition text, such as a Prometheus HTTP API pull.
        """
        if "line" not in frame.columns:
            frame = frame.with_row_index("line", offset=1)
        pairs = frame.get_column("labels").to_list()
        names = frame.get_column("name").to_list()
        keys: list[str] = []
        series: dict[str, tuple[str, dict[str, str]]] = {}
        for name, labels in zip(names, pairs, strict=True):
            as_dict = {p["name"]: p["value"] for p in labels or []}
            key = render_series(name, as_dict)
            series.setdefault(key, (name, as_dict))
            keys.append(key)
        samples = pl.DataFrame({
            "line": frame.get_column("line").cast(pl.Int64),
            "key": pl.Series(keys, dtype=pl.String).cast(pl.Categorical),
            "value": frame.get_column("value").cast(pl.Float64),
            "ts_ms": frame.get_column("ts_ms").cast(pl.Int64),
            "text": pl.Series([None] * frame.height, dtype=pl.String),
        })
        return self.normalize(RawBatch(samples, series, pl.DataFrame(schema=REJECT_SCHEMA)), prior)

    # -- the batch ------------------------------------------------------------------------------
    def _rule_id(self, rule: ValueRule) -> int | None:
        if not rule.reject_values and not rule.values:
            return None
        if rule not in self._rules:
            self._rules.append(rule)
        return self._rules.index(rule)

    def _table(self, res: dict[str, Resolution]) -> pl.DataFrame:
        rows = []
        for key, r in res.items():
            sent = min(r.sentinels, key=lambda s: s.at_or_above) if r.sentinels else None
            rows.append((key, r.name, r.reason, r.pool, r.node, r.device, r.metric, r.attributes, r.scale,
                         r.rule.min, r.rule.max, self._rule_id(r.rule), sent.at_or_above if sent else None,
                         sent.reason if sent else None, r.error is not None))
        return pl.DataFrame(rows, orient="row", schema={
            "key": pl.String, "name": pl.String, "sreason": pl.String, "pool": pl.String, "node": pl.String,
            "device": pl.String, "metric": pl.String, "attributes": pl.String, "scale": pl.Float64,
            "vmin": pl.Float64, "vmax": pl.Float64, "rule_id": pl.Int32, "sentinel": pl.Float64,
            "sent_reason": pl.String, "is_error": pl.Boolean,
        }).with_columns(pl.col("key").cast(pl.Categorical))

    def _reason(self) -> pl.Expr:
        """The reject reason of each sample, or null; the first failed check wins."""
        v, o = pl.col("value"), self.options
        expr: Any
        iso = pl.from_epoch("ts", time_unit="ms").dt.to_string("%Y-%m-%dT%H:%M:%SZ")
        expr = (
            pl.when(pl.col("sreason").is_not_null()).then(pl.col("sreason"))
            .when(pl.col("dup")).then(pl.lit("duplicate series in one scrape: same series and timestamp as an "
                                             "earlier line"))
            .when(pl.col("ts") > o.now_ms + o.max_ahead_ms).then(pl.format(
                "timestamp {} is more than a day ahead of now", iso))
            .when(pl.col("ts") < 0).then(pl.format("negative timestamp {}", pl.col("ts")))
            .when(v.is_nan()).then(pl.lit("value is NaN"))
            .when(v.is_infinite()).then(pl.format("value is {}", pl.when(v > 0).then(pl.lit("+Inf"))
                                                  .otherwise(pl.lit("-Inf"))))
            .when(v >= pl.col("sentinel")).then(pl.format("{} ({})", pl.col("sent_reason"), v))
            .when(v < pl.col("vmin")).then(pl.format("value {} is below the valid minimum {} of {}", v,
                                                     pl.col("vmin"), pl.col("name")))
            .when(v > pl.col("vmax")).then(pl.format("value {} is above the valid maximum {} of {}", v,
                                                     pl.col("vmax"), pl.col("name")))
        )
        for rid, rule in enumerate(self._rules):
            here = pl.col("rule_id") == rid
            if rule.reject_values:
                reasons = {float(k): f"{text} (value {k:g})" for k, text in rule.reject_values.items()}
                expr = expr.when(here & v.is_in(list(reasons))).then(
                    v.replace_strict(reasons, default=None, return_dtype=pl.String))
            if rule.values:
                allowed = ", ".join(f"{k:g}" for k in rule.values)
                expr = expr.when(here & v.is_in(list(rule.values)).not_()).then(
                    pl.format("value {} is not one of {} for {}", v, pl.lit(allowed), pl.col("name")))
        return expr.otherwise(pl.lit(None, pl.String))

    def _remap(self) -> pl.Expr:
        v = pl.col("value")
        expr: Any = pl.when(pl.lit(False)).then(v)
        for rid, rule in enumerate(self._rules):
            if rule.values:
                expr = expr.when(pl.col("rule_id") == rid).then(v.replace_strict(rule.values, default=v))
        return expr.otherwise(v)

    def _run(self, samples: pl.DataFrame, res: dict[str, Resolution], prior: StateLookup | None) -> Normalized:
        table = self._table(res)
        joined = (
            samples.lazy()
            .join(table.lazy(), on="key", how="left")
            .with_columns(ts=pl.col("ts_ms").fill_null(self.options.default_ts_ms))
            .with_columns(dup=pl.struct("key", "ts").is_first_distinct().not_())
            .with_columns(reason=self._reason())
            .with_columns(value=self._remap())
            .collect()
        )
        bad = joined.filter(pl.col("reason").is_not_null())
        good = joined.filter(pl.col("reason").is_null())
        rejects = [_rejects(bad)]
        direct = good.filter(pl.col("metric").is_not_null()).select(
            "ts", "pool", "node", "device", "metric", (pl.col("value") * pl.col("scale")).alias("value"),
            "attributes", pl.lit(1, pl.Int64).alias("n_src"))
        rows = [direct]
        derived_rows, derived_rejects = _derived(good, res)
        rows.append(derived_rows)
        rejects.append(derived_rejects)
        events, state, folded = error_rows(good.filter(pl.col("is_error")), res, prior)
        rows.append(events)
        out = pl.concat([r.select(list(ROW_SCHEMA)).cast(ROW_SCHEMA) for r in rows])  # type: ignore[arg-type]
        return Normalized(
            samples=out,
            rejects=pl.concat([r.cast(REJECT_SCHEMA) for r in rejects]),  # type: ignore[arg-type]
            versions=_versions(good, res),
            folded=folded,
            state=state if state.height else pl.DataFrame(schema=STATE_SCHEMA),
        )


def _rejects(bad: pl.DataFrame) -> pl.DataFrame:
    record = pl.coalesce(
        pl.col("text").str.strip_chars_end("\r\n"),
        pl.format("{} {} {}", pl.col("key").cast(pl.String), pl.col("value"), pl.col("ts_ms")),
    ).str.slice(0, RECORD_CHARS)
    return bad.select("line", record.alias("record"), "reason")


def _derived(good: pl.DataFrame, res: dict[str, Resolution]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Rows computed from several inputs (memory total = used + free + reserved), and the leftovers."""
    uses = [(key, u.rule, u.name, u.consumed_only, u.attributes) for key, r in res.items() for u in r.derived]
    empty = (pl.DataFrame(schema=ROW_SCHEMA), pl.DataFrame(schema=REJECT_SCHEMA))
    if not uses:
        return empty
    rules = {u.rule: u.derived for r in res.values() for u in r.derived}
    table = pl.DataFrame(uses, orient="row", schema={
        "key": pl.String, "rule": pl.String, "input": pl.String, "consumed_only": pl.Boolean,
        "dattrs": pl.String}).with_columns(pl.col("key").cast(pl.Categorical))
    inputs = good.join(table, on="key", how="inner")
    if inputs.height == 0:
        return empty
    groups = ["rule", "pool", "node", "device", "dattrs", "ts"]
    summed = inputs.group_by(groups).agg(
        pl.col("value").sum().alias("total"),
        pl.col("input").n_unique().alias("have"),
        pl.col("consumed_only").sum().cast(pl.Int64).alias("n_src"),
        pl.col("input").unique().sort().str.join(",").alias("names"),
    ).with_columns(
        need=pl.col("rule").replace_strict({k: len(d.inputs) for k, d in rules.items()}, return_dtype=pl.UInt32),
        metric=pl.col("rule").replace_strict({k: d.metric for k, d in rules.items()}, return_dtype=pl.String),
        factor=pl.col("rule").replace_strict({k: d.factor for k, d in rules.items()}, return_dtype=pl.Float64),
    )
    complete = summed.filter(pl.col("have") == pl.col("need")).select(
        "ts", "pool", "node", "device", "metric", (pl.col("total") * pl.col("factor")).alias("value"),
        pl.col("dattrs").alias("attributes"), "n_src")
    partial = summed.filter(pl.col("have") != pl.col("need")).select(*groups, "names")
    if partial.height == 0:
        return complete, pl.DataFrame(schema=REJECT_SCHEMA)
    missing = {}
    for rule, names in partial.select("rule", "names").unique().iter_rows():
        d = rules[rule]
        lacking = [n for n in d.inputs if n not in names.split(",")]
        missing[(rule, names)] = f"feeds only {d.metric}, which also needs {', '.join(lacking)} at the same time"
    left = inputs.filter(pl.col("consumed_only")).join(partial, on=groups, how="inner")
    reasons = [f"{name} {missing[(rule, names)]}" for name, rule, names in left.select(
        "input", "rule", "names").iter_rows()]
    return complete, _rejects(left.with_columns(reason=pl.Series(reasons, dtype=pl.String)))


def _versions(good: pl.DataFrame, res: dict[str, Resolution]) -> pl.DataFrame:
    rows = [(key, comp, ver, per) for key, r in res.items() for comp, ver, per in r.versions]
    if not rows:
        return pl.DataFrame(schema=VERSION_SCHEMA)
    table = pl.DataFrame(rows, orient="row", schema={
        "key": pl.String, "component": pl.String, "version": pl.String, "per_device": pl.Boolean,
    }).with_columns(pl.col("key").cast(pl.Categorical))
    seen = good.group_by("key", "pool", "node", "device").agg(
        pl.col("ts").min().alias("first"), pl.col("ts").max().alias("last"))
    joined = seen.join(table, on="key", how="inner").with_columns(
        device=pl.when(pl.col("per_device")).then(pl.col("device")).otherwise(pl.lit("")))
    return pl.concat([
        joined.select("pool", "node", "device", "component", "version", pl.col(col).alias("ts"))
        for col in ("first", "last")
    ]).cast(VERSION_SCHEMA)  # type: ignore[arg-type]
