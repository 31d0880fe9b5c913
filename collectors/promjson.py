"""Prometheus query responses (matrix results) into frames, without a Python object per sample.

Prometheus writes matrices compactly: `{"metric":{...},"values":[[1793491200,"0.5"],...]}`. The fast path
splits the body at those markers, decodes each series' labels with json (one small object per series), and
turns every values list into columns with Polars string kernels. Anything that does not look exactly like
that (spaces, warnings, another server's formatting) takes the plain json path; both give the same frame.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TypeGuard

import polars as pl

POINTS_SCHEMA = {"series": pl.Int32, "ts_ms": pl.Int64, "value": pl.Float64}
MAX_SECONDS = 2**53 / 1000  # a point's time in seconds, as ms, must fit an exact integer


class ResponseError(ValueError):
    """A response that is not a successful matrix result."""


@dataclass(frozen=True)
class RangeVector:
    """Raw samples of every series a selector matched: labels per series, points as one frame."""

    labels: list[dict[str, str]]  # per series, including __name__
    points: pl.DataFrame          # POINTS_SCHEMA; `series` indexes `labels`
    warnings: list[str]

    @classmethod
    def empty(cls) -> RangeVector:
        """No series."""
        return cls([], pl.DataFrame(schema=POINTS_SCHEMA), [])


def _values_frame(series_index: list[int], values: list[str]) -> pl.DataFrame:
    """`[[t,"v"],[t,"v"]]` texts, one per series, into (series, ts_ms, value) rows."""
    raw = pl.DataFrame({"series": pl.Series(series_index, dtype=pl.Int32), "v": values})
    pairs = (raw.with_columns(pl.col("v").str.strip_prefix("[[").str.strip_suffix("]]").str.split("],["))
             .explode("v").filter(pl.col("v").is_not_null() & (pl.col("v") != "")))
    parts = pl.col("v").str.split_exact(",", 1)
    value = parts.struct.field("field_1").str.strip_chars('"').str.replace(r"^\+?Inf$", "inf")
    return pairs.select(
        "series",
        (parts.struct.field("field_0").cast(pl.Float64) * 1000).round(0).cast(pl.Int64).alias("ts_ms"),
        value.cast(pl.Float64).alias("value"),
    )


def _fast(text: str) -> RangeVector | None:
    head, sep, rest = text.partition('"result":[')
    if not sep or head != '{"status":"success","data":{"resultType":"matrix",' or '"warnings"' in text[-4096:]:
        return None
    labels: list[dict[str, str]] = []
    index: list[int] = []
    values: list[str] = []
    for i, part in enumerate(rest.split('{"metric":')[1:]):
        metric, sep, tail = part.partition(',"values":')
        end = tail.find("]]")
        if not sep or not tail.startswith("[[") or end < 0:
            return None
        try:
            got = json.loads(metric)
        except (ValueError, RecursionError):  # not JSON, or a number too long to read: the slow path says so
            return None
        if not _is_labels(got):
            return None
        labels.append(got)
        index.append(i)
        values.append(tail[: end + 2])
    if not rest.startswith('{"metric":') and rest != "]}}":
        return None
    points = _values_frame(index, values) if values else pl.DataFrame(schema=POINTS_SCHEMA)
    return RangeVector(labels, points, [])


def _is_labels(value: object) -> TypeGuard[dict[str, str]]:
    """A JSON object of string values (its keys are strings in JSON)."""
    return isinstance(value, dict) and all(isinstance(v, str) for v in value.values())


def _is_time(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and abs(value) < MAX_SECONDS


def _slow(text: str) -> RangeVector:
    try:
        body = json.loads(text)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError, or an integer of thousands of digits
        raise ResponseError(f"response is not JSON: {str(exc)[:200]}") from None
    if not isinstance(body, dict):
        raise ResponseError(f"response is not a JSON object but {type(body).__name__}")
    if body.get("status") != "success":
        raise ResponseError(f"query failed: {str(body.get('error', 'unknown error'))[:200]}")
    data = body.get("data", {})
    kind = data.get("resultType") if isinstance(data, dict) else None
    if kind != "matrix":
        raise ResponseError(f"expected a matrix result, got {str(kind)[:40]!r}")
    result = data.get("result")
    if not isinstance(result, list):
        raise ResponseError("matrix result is not a list of series")
    labels: list[dict[str, str]] = []
    index: list[int] = []
    ts: list[float] = []
    values: list[str] = []
    for i, s in enumerate(result):
        metric = s.get("metric") if isinstance(s, dict) else None
        points = s.get("values") if isinstance(s, dict) else None
        if not _is_labels(metric) or not isinstance(points, list):
            raise ResponseError(f"series {i} of the result has no labels (metric) or no values list")
        labels.append(metric)
        for point in points:
            if not (isinstance(point, list) and len(point) == 2 and _is_time(point[0]) and isinstance(point[1], str)):
                raise ResponseError(f"series {i} has a point that is not [seconds, \"value\"]: {str(point)[:60]}")
            index.append(i)
            ts.append(float(point[0]))
            values.append(point[1])
    value = pl.Series(values, dtype=pl.String).str.replace(r"^\+?Inf$", "inf").cast(pl.Float64, strict=False)
    if value.null_count():
        bad = values[value.is_null().arg_true()[0]]
        raise ResponseError(f"a point's value {bad[:40]!r} is not a number")
    points = pl.DataFrame({
        "series": pl.Series(index, dtype=pl.Int32),
        "ts_ms": (pl.Series(ts, dtype=pl.Float64) * 1000).round(0).cast(pl.Int64),
        "value": value,
    })
    warnings = body.get("warnings", [])
    return RangeVector(labels, points, [str(w) for w in warnings] if isinstance(warnings, list) else [str(warnings)])


def parse_matrix(body: bytes, after_ms: int | None = None) -> RangeVector:
    """Parse a query response; keep only points newer than after_ms when given."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ResponseError(f"response is not UTF-8 text (byte 0x{body[exc.start]:02x} at offset {exc.start})"
                            ) from None
    try:
        fast = _fast(text)
    except pl.exceptions.PolarsError:  # a value or time the fast path cannot read: the slow path names it
        fast = None
    vector = fast or _slow(text)
    if after_ms is not None:
        vector = RangeVector(vector.labels, vector.points.filter(pl.col("ts_ms") > after_ms), vector.warnings)
    return vector
