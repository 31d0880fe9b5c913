"""Identities from OIDC claims and from a trusted proxy header."""

from __future__ import annotations

import pytest

from access import AccessDenied, Identity, decide, from_claims, from_headers
from access.identity import HEADER, LOCAL_USER, OIDC
from access.policy import beyond_loopback
from access.roles import RolesError, load_roles_text


@pytest.mark.parametrize(("claims", "expected"), [
    ({"is_logged_in": False, "email": "a@example.com"}, None),
    ({"email": "a@example.com"}, None),  # no login flag: not logged in
    ({"is_logged_in": True, "email": "Ann@Example.COM", "email_verified": True, "name": "Ann Lee",
      "groups": ["ops", "leads", "ops"]}, Identity("ann@example.com", "Ann Lee", ("ops", "leads"), OIDC)),
    # a name the user may choose only names them; an email the provider has not verified identifies nobody
    ({"is_logged_in": True, "preferred_username": "bo@example.com"}, Identity(None, "bo@example.com", (), OIDC)),
    ({"is_logged_in": True, "email": "lee@example.com", "email_verified": False, "name": "Mallory"},
     Identity(None, "Mallory", (), OIDC, unverified="lee@example.com")),
    ({"is_logged_in": True, "email": "lee@example.com", "name": "Mallory"},
     Identity(None, "Mallory", (), OIDC, unverified="lee@example.com")),  # no claim: not verified
    ({"is_logged_in": True, "email": "lee@example.com", "email_verified": "true"},
     Identity("lee@example.com", "lee@example.com", (), OIDC)),  # some providers send the flag as text
    ({"is_logged_in": True, "sub": "1234", "groups": "a, b"}, Identity(None, "1234", ("a", "b"), OIDC)),
    ({"is_logged_in": True, "email": "  ", "groups": 7}, Identity(None, "unnamed user", (), OIDC)),
])
def test_claims(claims: dict[str, object], expected: Identity | None) -> None:
    assert from_claims(claims) == expected


def test_the_groups_claim_is_configurable() -> None:
    got = from_claims({"is_logged_in": True, "email": "a@x.org", "email_verified": True, "cognito:groups": ["leads"],
                       "groups": ["no"]},
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
    assert Identity(None, "Mallory", (), OIDC, unverified="lee@example.com").label == \
        "Mallory (lee@example.com, not verified)"


ROLES_TEXT = "users:\n  lee@example.com: lead\ngroups:\n  leads: lead\n"


@pytest.mark.parametrize(("claims", "role"), [
    ({"email": "lee@example.com", "email_verified": True}, "lead"),
    ({"email": "lee@example.com", "email_verified": False, "name": "Mallory"}, "viewer"),
    ({"email": "lee@example.com", "email_verified": False, "groups": ["leads"]}, "viewer"),  # a viewer at most
    ({"preferred_username": "lee@example.com"}, "viewer"),
    ({"sub": "1234", "groups": ["leads"]}, "lead"),  # the provider's groups still count
])
def test_roles_match_verified_emails_and_groups_only(claims: dict[str, object], role: str) -> None:
    decision = decide(from_claims({"is_logged_in": True, **claims}), load_roles_text(ROLES_TEXT, "roles.yaml"))
    assert decision is not None and decision.role == role


def test_a_roles_file_may_refuse_unverified_emails() -> None:
    roles = load_roles_text(ROLES_TEXT + "unverified_email: refuse\n", "roles.yaml")
    with pytest.raises(AccessDenied, match=r"has not verified lee@example.com, and roles.yaml refuses"):
        decide(from_claims({"is_logged_in": True, "email": "lee@example.com"}), roles)
    with pytest.raises(RolesError, match=r"unverified_email: unknown value 'maybe'"):
        load_roles_text("unverified_email: maybe\n", "roles.yaml")


@pytest.mark.parametrize(("address", "beyond"), [
    ("127.0.0.1", False), ("127.1.2.3", False), ("localhost", False), ("::1", False), ("[::1]", False),
    ("0.0.0.0", True), ("::", True), ("10.1.2.3", True), ("console.example", True), ("", True),
])
def test_which_addresses_reach_beyond_this_machine(address: str, beyond: bool) -> None:
    assert beyond_loopback(address) is beyond


def test_a_local_user_off_loopback_is_a_viewer() -> None:
    decision = decide(LOCAL_USER, None, exposed_at="0.0.0.0")
    assert decision is not None and decision.role == "viewer" and "0.0.0.0" in decision.why
    local = decide(LOCAL_USER, None)
    assert local is not None and local.role == "lead"
