"""Fuzz sweep of Prometheus query responses: mutated bodies and generated JSON documents.

`parse_matrix` must give a RangeVector or raise ResponseError (which the pull turns into a failed chunk with
its reason); a RangeVector's every point names one of its series.
"""

from __future__ import annotations

import json

import polars as pl
import pytest
from hypothesis import given
from hypothesis import strategies as st

from collectors.promjson import POINTS_SCHEMA, RangeVector, ResponseError, parse_matrix
from tests.fuzzing import cases, mutated

MATRIX = (b'{"status":"success","data":{"resultType":"matrix","result":['
          b'{"metric":{"__name__":"DCGM_FI_DEV_GPU_UTIL","Hostname":"h100-a-01","gpu":"0"},'
          b'"values":[[1793491200,"40"],[1793491215.5,"NaN"],[1793491230,"+Inf"]]},'
          b'{"metric":{"__name__":"up"},"values":[[1793491200,"1"]]}]}}')
SEEDS = [
    MATRIX,
    json.dumps(json.loads(MATRIX), indent=1).encode(),  # the slow path's spelling
    b'{"status":"success","data":{"resultType":"matrix","result":[]}}',
    b'{"status":"success","warnings":["partial"],"data":{"resultType":"matrix","result":[{"metric":{},"values":[]}]}}',
    b'{"status":"error","errorType":"bad_data","error":"parse error at char 3"}',
    b'{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"1"]}]}}',
]
JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
                    max_leaves=12)
SHAPED = st.fixed_dictionaries({
    "status": st.sampled_from(["success", "error", 1]),
    "data": st.fixed_dictionaries({
        "resultType": st.sampled_from(["matrix", "vector", None]),
        "result": st.lists(st.fixed_dictionaries({
            "metric": st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=3) | JSON,
            "values": st.lists(st.tuples(st.floats() | st.integers() | st.text(max_size=4),
                                         st.text(max_size=6) | st.floats() | JSON), max_size=3) | JSON,
        }), max_size=3) | JSON,
    }) | JSON,
}, optional={"warnings": st.lists(st.text(max_size=5), max_size=2) | JSON, "error": JSON})


def check(body: bytes) -> None:
    try:
        vector = parse_matrix(body)
    except ResponseError as exc:
        assert str(exc)
        return
    assert isinstance(vector, RangeVector)
    assert vector.points.schema == pl.Schema(POINTS_SCHEMA)
    if vector.points.height:
        assert 0 <= vector.points.get_column("series").min() <= vector.points.get_column("series").max() < len(
            vector.labels)
    assert all(isinstance(k, str) and isinstance(v, str) for labels in vector.labels for k, v in labels.items())


@cases(400, path="promjson", sweep=6000)
@given(mutated(SEEDS))
def test_a_mutated_response_is_a_vector_or_a_response_error(body: bytes) -> None:
    check(body)


@cases(150, path="promjson", sweep=4000)
@given(SHAPED | JSON)
def test_a_generated_document_is_a_vector_or_a_response_error(doc: object) -> None:
    check(json.dumps(doc).encode())


ONCE_CRASHED = [  # (body, the ResponseError's message); each once raised another exception
    (b"\xff" + MATRIX, "response is not UTF-8 text (byte 0xff at offset 0)"),
    (b"[1]", "response is not a JSON object but list"),
    (b'{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"a":' + b"1" * 5000
     + b'},"values":[]}]}}',
     "response is not JSON: Exceeds the limit (4300 digits)"),
    (b'{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[1,"x"]]}]}}',
     "a point's value 'x' is not a number"),
    (b'{"status":"success","data":{"resultType":"matrix","result":[{"metric":1,"values":[]}]}}',  # was accepted
     "series 0 of the result has no labels (metric) or no values list"),
    (b'{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[1e300,"1"]]}]}}',
     'series 0 has a point that is not [seconds, "value"]'),
]


@pytest.mark.parametrize(("body", "said"), ONCE_CRASHED, ids=range(len(ONCE_CRASHED)))
def test_responses_that_once_crashed_are_a_response_error(body: bytes, said: str) -> None:
    with pytest.raises(ResponseError) as info:
        parse_matrix(body)
    assert str(info.value).startswith(said)
