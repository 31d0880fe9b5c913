"""The positioned YAML reader on its own: each read, its problems with file, line and path, and numbers as JSON
and YAML 1.2 write them."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pool_registry.yamlread import ConfigError, Reader


def _read(text: str) -> tuple[Reader, dict[str, object]]:
    """The reader and the top mapping of `text` (keys a..e allowed)."""
    r = Reader("f.yaml")
    root = r.root(text, "a mapping", ConfigError)
    return r, r.mapping(root, "", required=("a",), optional=("b", "c", "d", "e"))  # type: ignore[return-value]


@pytest.mark.parametrize("text, value, problem", [
    ("a: 2.5", 2.5, None),
    ("a: 3", 3.0, None),
    ("a: 1e-05", 1e-05, None),            # JSON and YAML 1.2: a number; YAML 1.1: a string
    ("a: 2.5E+3", 2500.0, None),
    ("a: 1.e3", 1000.0, None),
    ("a: '1e-05'", 0.0, "f.yaml:1: a: expected a number, got '1e-05' (string)"),
    ("a: 1e", 0.0, "f.yaml:1: a: expected a number, got '1e' (string)"),
    ("a: .inf", 0.0, "f.yaml:1: a: expected a finite number, got '.inf'"),
    ("a: [1]", 0.0, "f.yaml:1: a: expected a number, got a list"),
    ("a: -1", 0.0, "f.yaml:1: a: must be > 0, got -1"),
])
def test_a_number_is_read_or_its_problem_placed(text: str, value: float, problem: str | None) -> None:
    r, fields = _read(text)
    assert r.number(fields["a"], "a", gt=0) == value  # type: ignore[arg-type]
    assert [str(p) for p in r.problems] == ([problem] if problem else [])


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_every_float_json_writes_reads_back_to_the_bit(x: float) -> None:
    r, fields = _read(json.dumps({"a": x}))
    assert r.number(fields["a"], "a") == x  # type: ignore[arg-type]
    assert not r.problems


def test_keys_unknown_missing_and_repeated_are_each_placed() -> None:
    r = Reader("f.yaml")
    root = r.root("b: 1\nbb: 2\nb: 3\n", "a mapping", ConfigError)
    r.mapping(root, "top", required=("a",), optional=("b", "bc"))
    assert [str(p) for p in sorted(r.problems, key=lambda p: (p.line or 0, p.path))] == [
        "f.yaml:1: top.a: missing required field",
        "f.yaml:2: top.bb: unknown key 'bb'; did you mean 'b'? expected one of: a, b, bc",
        "f.yaml:3: top.b: duplicate key (first at line 1)",
    ]


@pytest.mark.parametrize("text, message", [
    ("a: [1, 2\nb: 3\n", "f.yaml:2: YAML syntax error"),
    ("a: 1\nb: x\x07y\n", "f.yaml:2: YAML syntax error: character U+0007 at column 5 is not allowed in YAML"),
    ("", "f.yaml: empty file; expected a mapping"),
])
def test_a_document_that_cannot_be_read_raises_with_its_line(text: str, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        Reader("f.yaml").root(text, "a mapping", ConfigError)
    assert str(err.value).startswith(message)


def test_strings_refuse_numbers_and_text_takes_them() -> None:
    r, fields = _read("a: 12.10\nb: '12.10'\nc: x\n")
    assert r.string(fields["b"], "b") == "12.10"  # type: ignore[arg-type]
    assert r.text(fields["a"], "a") == "12.10"  # type: ignore[arg-type]
    assert r.string(fields["a"], "a") == ""  # type: ignore[arg-type]
    assert [str(p) for p in r.problems] == ["f.yaml:1: a: expected a string, got '12.10' (number)"]
