"""Prometheus query responses (matrix results) into frames, without a Python object per sample.

Prometheus writes matrices compactly: `{"metric":{...},"values":[[1793491200,"0.5"],...]}`. The fast path
splits the body at those markers, decodes each series' labels with json (one small object per series), and
turns every values list into columns with Polars string kernels. Anything that does not look exactly like
that (spaces, warnings, another server's formatting) takes the plain json path; both give the same frame.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import polars as pl

POINTS_SCHEMA = {"series": pl.Int32, "ts_ms": pl.Int64, "value": pl.Float64}


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
        labels.append(json.loads(metric))
        index.append(i)
        values.append(tail[: end + 2])
    if not rest.startswith('{"metric":') and rest != "]}}":
        return None
    points = _values_frame(index, values) if values else pl.DataFrame(schema=POINTS_SCHEMA)
    return RangeVector(labels, points, [])


def _slow(text: str) -> RangeVector:
    try:
        body = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ResponseError(f"response is not JSON: {exc}") from None
    if body.get("status") != "success":
        raise ResponseError(f"query failed: {body.get('error', 'unknown error')}")
    data = body.get("data", {})
    if data.get("resultType") != "matrix":
        raise ResponseError(f"expected a matrix result, got {data.get('resultType')!r}")
    labels, index, ts, values = [], [], [], []
    for i, s in enumerate(data["result"]):
        labels.append(s["metric"])
        for t, v in s["values"]:
            index.append(i)
            ts.append(float(t))
            values.append(v)
    points = pl.DataFrame({
        "series": pl.Series(index, dtype=pl.Int32),
        "ts_ms": (pl.Series(ts, dtype=pl.Float64) * 1000).round(0).cast(pl.Int64),
        "value": pl.Series(values, dtype=pl.String).str.replace(r"^\+?Inf$", "inf").cast(pl.Float64),
    })
    return RangeVector(labels, points, [str(w) for w in body.get("warnings", [])])


def parse_matrix(body: bytes, after_ms: int | None = None) -> RangeVector:
    """Parse a query response; keep only points newer than after_ms when given."""
    text = body.decode("utf-8")
    vector = _fast(text) or _slow(text)
    if after_ms is not None:
        vector = RangeVector(vector.labels, vector.points.filter(pl.col("ts_ms") > after_ms), vector.warnings)
    return vector
