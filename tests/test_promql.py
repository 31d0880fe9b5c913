"""The PromQL writers: literals that parse back to the same value, regexes that match what the registry means."""

from __future__ import annotations

import fnmatch
import json
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from normalizers.promrules import promql

TEXT = st.text(alphabet="ab-_.*?[]!^$|()+{}\\:0 ", max_size=12)


@given(st.floats(allow_nan=False))
def test_a_number_literal_is_the_same_float(value: float) -> None:
    assert float(promql.number(value).replace("Inf", "inf")) == value


@pytest.mark.parametrize(("value", "text"), [(1048576.0, "1048576"), (0.01, "0.01"), (1e-06, "1e-06"),
                                             (9223372036854775792.0, "9.223372036854776e+18"), (-1.0, "-1"),
                                             (float("inf"), "+Inf")])
def test_number_spelling(value: float, text: str) -> None:
    assert promql.number(value) == text


@given(TEXT)
def test_a_literal_regex_matches_exactly_its_text(text: str) -> None:
    regex = re.compile(promql.literal(text))
    assert regex.fullmatch(text)
    assert not regex.fullmatch(text + "x")


@given(st.text(alphabet="ab-*?[]!", max_size=8), st.text(alphabet="ab-[]!", max_size=8))
def test_a_glob_regex_matches_what_fnmatch_matches(pattern: str, name: str) -> None:
    assert bool(re.fullmatch(promql.glob(pattern), name)) == fnmatch.fnmatchcase(name, pattern)


@pytest.mark.parametrize(("pattern", "regex"), [("h100-a-*", "h100-a-.*"), ("node?", "node."),
                                                ("gpu[0-3]", "gpu[0-3]"), ("gpu[!0]", "gpu[^0]"),
                                                ("a.b", "a\\.b"), ("[", "\\[")])
def test_glob_spelling(pattern: str, regex: str) -> None:
    assert promql.glob(pattern) == regex


@given(st.text(max_size=20))
def test_a_string_literal_reads_back(text: str) -> None:
    assert json.loads(promql.string(text)) == text


def test_a_replacement_is_taken_literally() -> None:
    assert promql.replacement("cost$1") == "cost$$1"


@pytest.mark.parametrize(("names", "matchers", "text"), [
    (("DCGM_FI_DEV_GPU_UTIL",), (), "DCGM_FI_DEV_GPU_UTIL"),
    (("vllm:num_requests_running",), ('pool!=""',), 'vllm:num_requests_running{pool!=""}'),
    (("tgi_request_success", "tgi_request_success_total"), (),
     '{__name__=~"tgi_request_success|tgi_request_success_total"}'),
])
def test_selector(names: tuple[str, ...], matchers: tuple[str, ...], text: str) -> None:
    assert promql.selector(names, matchers) == text
