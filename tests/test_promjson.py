"""Prometheus matrix responses: the fast path and the plain json path agree on anything Prometheus can write."""

from __future__ import annotations

import json
import math

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collectors.promjson import ResponseError, _fast, _slow, parse_matrix

label_text = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12) | st.sampled_from(
    ['a,"values":[[1,"2"]]', '{"metric":{}}', "\\", '"', "]]", "ünï"])
values = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-10**12, 10**12))


def render(v: float | int) -> str:
    """A sample value as Prometheus writes it."""
    if isinstance(v, float) and math.isnan(v):
        return "NaN"
    if isinstance(v, float) and math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    return repr(v) if isinstance(v, float) else str(v)


def body(result: list[dict[str, object]]) -> bytes:
    """Compact JSON, as Prometheus' encoder writes it."""
    return json.dumps({"status": "success", "data": {"resultType": "matrix", "result": result}},
                      separators=(",", ":"), ensure_ascii=False).encode()


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.dictionaries(st.sampled_from(["gpu", "Hostname", "le", "x"]), label_text, max_size=3),
                          st.lists(st.tuples(st.integers(1_600_000_000, 1_900_000_000), st.integers(0, 999), values),
                                   min_size=1, max_size=5)), max_size=4))
def test_fast_path_equals_json_path(series: list[tuple[dict[str, str], list[tuple[int, int, float]]]]) -> None:
    result = [{"metric": {"__name__": "m", **labels},
               "values": [[s + ms / 1000, render(v)] if ms else [s, render(v)] for s, ms, v in points]}
              for labels, points in series]
    text = body(result).decode()
    fast, slow = _fast(text), _slow(text)
    assert fast is not None
    assert fast.labels == slow.labels == [r["metric"] for r in result]
    assert fast.points.equals(slow.points, null_equal=True)
    expected = [(i, round(p[0] * 1000), float(p[1].replace("+Inf", "inf"))) for i, r in enumerate(result)
                for p in r["values"]]  # type: ignore[attr-defined]
    got = fast.points.rows()
    assert [(a, b) for a, b, _ in got] == [(a, b) for a, b, _ in expected]
    assert all(x == y or (math.isnan(x) and math.isnan(y)) for (_, _, x), (_, _, y) in zip(got, expected, strict=True))


def test_points_at_or_before_the_window_start_are_dropped() -> None:
    raw = body([{"metric": {"__name__": "m"}, "values": [[100, "1"], [115, "2"], [130, "3"]]}])
    assert parse_matrix(raw, after_ms=115_000).points["ts_ms"].to_list() == [130_000]


def test_warnings_and_other_formatting_take_the_json_path() -> None:
    spaced = b'{"status": "success", "data": {"resultType": "matrix", "result": [{"metric": {"__name__": "m"}, ' \
             b'"values": [[1, "5"]]}]}, "warnings": ["partial response"]}'
    assert _fast(spaced.decode()) is None
    vector = parse_matrix(spaced)
    assert vector.warnings == ["partial response"]
    assert vector.points.rows() == [(0, 1000, 5.0)]


def test_empty_result() -> None:
    vector = parse_matrix(body([]))
    assert vector.labels == [] and vector.points.height == 0
    assert vector.points.schema == pl.Schema({"series": pl.Int32, "ts_ms": pl.Int64, "value": pl.Float64})


@pytest.mark.parametrize(("raw", "message"), [
    (b'{"status":"error","errorType":"bad_data","error":"parse error at char 3"}', "query failed: parse error"),
    (b'{"status":"success","data":{"resultType":"vector","result":[]}}', "expected a matrix result, got 'vector'"),
    (b"<html>502 Bad Gateway</html>", "response is not JSON"),
])
def test_bad_responses(raw: bytes, message: str) -> None:
    with pytest.raises(ResponseError, match=message):
        parse_matrix(raw)
