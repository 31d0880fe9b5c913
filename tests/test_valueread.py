"""The value reader takes exactly the values the positioned reader takes, and hands every other one back."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
import yaml

from pool_registry import Reader
from pool_registry.valueread import Redo, ValueReader

# (method, keyword arguments, value as YAML text): each one the positioned reader takes
TAKEN = [
    ("string", {}, "abc"), ("string", {"allow_empty": True}, "''"), ("text", {}, "p1"),
    ("number", {"gt": 0}, "3.35"), ("number", {"ge": 0}, "0"), ("number", {"le": 1}, "1"),
    ("integer", {"gt": 0}, "8"), ("integer", {"ge": 0, "le": 1}, "1"), ("integer", {}, "0x10"),
    ("boolean", {}, "yes"), ("boolean", {}, "false"), ("date", {}, "2026-11-24"), ("date", {}, "'2026-11-24'"),
    ("date", {}, "2026-11-24 10:30:00"), ("string_list", {}, "[a, b]"), ("string_map", {}, "{a: b}"),
    ("sequence", {}, "[1, x]"), ("free_mapping", {}, "{a: 1}"),
]

# each one the positioned reader refuses, or takes as text the quick read does not keep (an id written as 12.10)
REFUSED = [
    ("string", {}, "12.10"), ("string", {}, "' '"), ("string", {}, "~"), ("string", {}, "[a]"), ("text", {}, "8"),
    ("text", {}, "12.10"), ("text", {}, "~"), ("number", {}, "x"), ("number", {}, "true"), ("number", {}, ".inf"),
    ("number", {}, ".nan"), ("number", {"gt": 0}, "0"), ("number", {"ge": 0}, "-1"), ("number", {"le": 1}, "1.5"),
    ("integer", {}, "8.0"), ("integer", {}, "true"), ("integer", {"gt": 0}, "0"), ("integer", {"le": 1}, "2"),
    ("boolean", {}, "1"), ("date", {}, "'24.11.2026'"), ("date", {}, "8"), ("string_list", {}, "[a, 1]"),
    ("string_list", {}, "a"), ("string_map", {}, "{a: 1}"), ("string_map", {}, "[a]"), ("sequence", {}, "{}"),
    ("free_mapping", {}, "[]"),
]


def _both(method: str, kwargs: dict[str, Any], text: str) -> tuple[Any, Any]:
    """What the positioned reader reads (or None when it records a problem), and what the value reader does."""
    node = yaml.compose(f"v: {text}\n", Loader=yaml.SafeLoader).value[0][1]
    positioned = Reader("f.yaml")
    got = getattr(positioned, method)(node, "v", **kwargs)
    value = yaml.safe_load(f"v: {text}\n")["v"]
    return (None if positioned.problems else got), (lambda: getattr(ValueReader("f.yaml"), method)(value, "v",
                                                                                                     **kwargs))


@pytest.mark.parametrize(("method", "kwargs", "text"), TAKEN, ids=[f"{m}:{t}" for m, _, t in TAKEN])
def test_takes_what_the_positioned_reader_takes_with_the_same_value(method: str, kwargs: dict[str, Any],
                                                                   text: str) -> None:
    expected, quick = _both(method, kwargs, text)
    assert expected is not None
    got = quick()
    if method == "sequence":  # the positioned reader's items are nodes: the same number, each the value
        assert [yaml.safe_load(f"v: {n.value}")["v"] for n in expected] == got
    elif method == "free_mapping":
        assert list(expected) == list(got) and got == yaml.safe_load(f"v: {text}")["v"]
    else:
        assert got == expected and type(got) is type(expected)


@pytest.mark.parametrize(("method", "kwargs", "text"), REFUSED, ids=[f"{m}:{t}" for m, _, t in REFUSED])
def test_hands_back_what_it_cannot_read_the_same_way(method: str, kwargs: dict[str, Any], text: str) -> None:
    _, quick = _both(method, kwargs, text)
    with pytest.raises(Redo):
        quick()


def test_mapping_wants_every_required_key_and_no_other() -> None:
    r = ValueReader("f.yaml")
    assert r.mapping({"a": 1, "b": 2}, "m", required=("a",), optional=("b",)) == {"a": 1, "b": 2}
    for bad in ({"b": 2}, {"a": 1, "c": 3}, [("a", 1)], None):
        with pytest.raises(Redo):
            r.mapping(bad, "m", required=("a",), optional=("b",))


def test_a_present_null_is_read_not_defaulted() -> None:
    r = ValueReader("f.yaml")
    assert r.optional({}, "n", "p", r.integer, 7) == 7
    with pytest.raises(Redo):
        r.optional({"n": None}, "n", "p", r.integer, 7)  # the positioned reader says 'expected an integer'


def test_a_free_mapping_is_a_copy() -> None:
    source = {"a": "1"}
    got = ValueReader("f.yaml").string_map(source, "s")
    got["b"] = "2"
    assert source == {"a": "1"}
    assert ValueReader("f.yaml").date(dt.datetime(2026, 11, 24, 10), "d") == dt.date(2026, 11, 24)
