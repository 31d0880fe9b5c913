"""Version ordering and requirement specifiers."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pool_registry import SpecifierError, parse_specifier, satisfies, version_key


@pytest.mark.parametrize(("version", "spec", "ok"), [
    ("0.15.1", ">=0.15,<0.16", True),
    ("0.16.0", ">=0.15,<0.16", False),
    ("0.14.9", ">=0.15,<0.16", False),
    ("550.144.03", ">=550.54.15", True),   # numeric, not lexical: 144 > 54
    ("550.9", ">=550.54", False),
    ("8.0.0", "==8.0.*", True),
    ("8.1.0", "==8.0.*", False),
    ("1.22.1", "~=1.22.0", True),
    ("1.23.0", "~=1.22.0", False),
    ("24.1.rc3", "!=24.1.rc2", True),
    ("v0.5.4", "==0.5.4", True),
])
def test_satisfies(version: str, spec: str, ok: bool) -> None:
    assert satisfies(version, spec) is ok


@pytest.mark.parametrize("spec", ["at least 1", ">=", "=>1.0", ">=1.0;<2", ">=1.*"])
def test_bad_specifiers_are_refused_with_the_clause(spec: str) -> None:
    with pytest.raises(SpecifierError):
        parse_specifier(spec)


@given(st.lists(st.integers(0, 999), min_size=1, max_size=4), st.lists(st.integers(0, 999), min_size=1, max_size=4))
def test_version_key_orders_like_integer_tuples(a: list[int], b: list[int]) -> None:
    va, vb = ".".join(map(str, a)), ".".join(map(str, b))
    assert (version_key(va) < version_key(vb)) == (tuple(a) < tuple(b))
    assert satisfies(va, f">={vb}") == (tuple(a) >= tuple(b))
