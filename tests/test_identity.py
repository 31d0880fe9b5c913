"""Identities from OIDC claims and from a trusted proxy header."""

from __future__ import annotations

import pytest

from access import Identity, from_claims, from_headers
from access.identity import HEADER, OIDC


@pytest.mark.parametrize(("claims", "expected"), [
    ({"is_logged_in": False, "email": "a@example.com"}, None),
    ({"email": "a@example.com"}, None),  # no login flag: not logged in
    ({"is_logged_in": True, "email": "Ann@Example.COM", "name": "Ann Lee", "groups": ["ops", "leads", "ops"]},
     Identity("ann@example.com", "Ann Lee", ("ops", "leads"), OIDC)),
    ({"is_logged_in": True, "preferred_username": "bo@example.com"}, Identity("bo@example.com", "bo@example.com", (),
                                                                              OIDC)),
    ({"is_logged_in": True, "sub": "1234", "groups": "a, b"}, Identity(None, "1234", ("a", "b"), OIDC)),
    ({"is_logged_in": True, "email": "  ", "groups": 7}, Identity(None, "unnamed user", (), OIDC)),
])
def test_claims(claims: dict[str, object], expected: Identity | None) -> None:
    assert from_claims(claims) == expected


def test_the_groups_claim_is_configurable() -> None:
    got = from_claims({"is_logged_in": True, "email": "a@x.org", "cognito:groups": ["leads"], "groups": ["no"]},
                      "cognito:groups")
    assert got is not None and got.groups == ("leads",)


@pytest.mark.parametrize(("headers", "expected"), [
    ({}, None),
    ({"X-Forwarded-Email": " "}, None),
    ({"x-forwarded-email": "Ann@Example.com"}, Identity("ann@example.com", "ann@example.com", (), HEADER)),
    ({"X-FORWARDED-EMAIL": "a@x.org", "X-Forwarded-Groups": "ops, leads,,"},
     Identity("a@x.org", "a@x.org", ("ops", "leads"), HEADER)),
    ({"X-Forwarded-User": "a@x.org"}, None),  # only the configured header counts
])
def test_headers(headers: dict[str, str], expected: Identity | None) -> None:
    assert from_headers(headers, "X-Forwarded-Email", "X-Forwarded-Groups") == expected


def test_labels() -> None:
    assert Identity("a@x.org", "Ann", ()).label == "Ann (a@x.org)"
    assert Identity("a@x.org", "a@x.org", ()).label == "a@x.org"
    assert Identity(None, "local user", ()).label == "local user"
