"""The careful line parser: escapes, spacing, values, timestamps, and a render/parse round trip."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from normalizers.textformat import (
    LineError,
    parse_line,
    parse_series,
    parse_timestamp,
    parse_value,
    render_series,
)


def test_escapes_unsorted_labels_spaces_and_empty_values() -> None:
    line = parse_line('vllm:e2e{z="", a="say \\"hi\\"\\n", path="C:\\\\tmp"}  2.5 1723621883587')
    assert line.name == "vllm:e2e"
    assert line.labels == {"z": "", "a": 'say "hi"\n', "path": "C:\\tmp"}
    assert list(line.labels) == ["z", "a", "path"]  # order as written; keys sort only when rendered
    assert line.value == 2.5
    assert line.ts_ms == 1723621883587


@pytest.mark.parametrize("text, value", [
    ('m{a="\\q"} 1', "\\q"),                     # an unknown escape is read as written
    ('m{foo="b\\\\a\\z"} 1', "b\\a\\z"),          # \\ is one backslash, \z stays
    ('m{foo="\\foo"} 1', "\\foo"),
    ('m{path="C:\\Program Files\\x"} 1', "C:\\Program Files\\x"),
    ('m{re="^a\\.b$"} 1', "^a\\.b$"),
])
def test_other_escapes_are_read_as_written(text: str, value: str) -> None:
    (label,) = parse_line(text).labels.values()
    assert label == value
    _, labels, _ = parse_series(render_series("m", {"a": value}))
    assert labels == {"a": value}  # and the series key reads back the same


@pytest.mark.parametrize("raw, expected", [
    ("NaN", math.nan), ("+Inf", math.inf), ("-Inf", -math.inf), ("1e3", 1000.0), ("-0.5", -0.5), (".5", 0.5),
    ("9223372036854775794", 9223372036854775794.0),
])
def test_values(raw: str, expected: float) -> None:
    got = parse_value(raw)
    assert (math.isnan(got) and math.isnan(expected)) or got == expected


@pytest.mark.parametrize("raw", ["1_000", "0x10", "abc", "", "1.2.3", "--1"])
def test_bad_values(raw: str) -> None:
    with pytest.raises(LineError, match="bad value"):
        parse_value(raw)


@pytest.mark.parametrize("raw, ms", [
    ("1723621883587", 1723621883587),    # Prometheus text format: ms
    ("1606402000", 1606402000000),       # below 1e11: seconds (Ascend test fixtures)
    ("1723621883.5", 1723621883500),     # OpenMetrics: float seconds
    ("99999999999", 99999999999000),     # the last integer read as seconds
    ("100000000000", 100000000000),      # the first read as ms
])
def test_timestamps(raw: str, ms: int) -> None:
    assert parse_timestamp(raw) == ms


@pytest.mark.parametrize("text, reason", [
    ('m{a="1"', "unterminated label set"),
    ('m{a="1', "unterminated value of label 'a'"),
    ('m{a="1",a="2"} 1', "duplicate label 'a'"),
    ('m{a="1" b="2"} 1', "expected ',' or '}'"),
    ('m{1a="x"} 1', "bad label name"),
    ("m{a=1} 1", "expected '\"' to open the value of label 'a'"),
    ("m", "missing value"),
    ("m 1 2 3", "unexpected text after the timestamp"),
    ("m 1 soon", "bad timestamp 'soon'"),
    ("...", "bad metric name"),
    ("9m 1", "bad metric name"),
])
def test_bad_lines_give_reasons(text: str, reason: str) -> None:
    with pytest.raises(LineError) as info:
        parse_line(text)
    assert reason in str(info.value)


def test_openmetrics_exemplar_is_ignored() -> None:
    line = parse_line('rpc_bucket{le="0.1"} 8 1520879607.789 # {trace_id="KOO5S4vxi0o"} 0.067 1520879602.29')
    assert (line.value, line.ts_ms, line.labels) == (8.0, 1520879607789, {"le": "0.1"})


def test_trailing_comma_and_empty_label_set() -> None:
    assert parse_series('m{a="1",}') == ("m", {"a": "1"}, 9)
    assert parse_series("m{}") == ("m", {}, 3)


_names = st.from_regex(r"[a-zA-Z_:][a-zA-Z0-9_:]{0,20}", fullmatch=True)
_label = st.from_regex(r"[a-zA-Z_][a-zA-Z0-9_]{0,10}", fullmatch=True)
_value = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=20)


@given(_names, st.dictionaries(_label, _value, max_size=6))
def test_render_then_parse_round_trips(name: str, labels: dict[str, str]) -> None:
    text = render_series(name, labels)
    got_name, got_labels, end = parse_series(text)
    assert (got_name, got_labels, end) == (name, labels, len(text))
