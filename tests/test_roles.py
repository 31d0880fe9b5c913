"""The roles loader: every bad file is refused with its line, field and what was expected; matching and
precedence of emails, groups, domains and the default."""

from __future__ import annotations

from pathlib import Path

import pytest

from access import LEAD, VIEWER, RoleMap, RolesError, load_roles, load_roles_text
from tests.conftest import REPO

GOOD = """\
version: 1
default: viewer
groups_claim: roles
users:
  Alice@Example.com: lead
  bob@example.com: viewer
  "*@example.com": lead
  "*@contractor.example": viewer
groups:
  platform-leads: lead
  oncall: viewer
"""


def test_a_good_file_is_read_whole() -> None:
    m = load_roles_text(GOOD, "roles.yaml")
    assert m.users == {"alice@example.com": LEAD, "bob@example.com": VIEWER}
    assert m.domains == {"example.com": LEAD, "contractor.example": VIEWER}
    assert m.groups == {"platform-leads": LEAD, "oncall": VIEWER}
    assert (m.default, m.groups_claim, m.source) == (VIEWER, "roles", "roles.yaml")


@pytest.mark.parametrize(("text", "expected"), [
    ("users:\n  alice@example.com: admin\n",
     "roles.yaml:2: users.alice@example.com: unknown role 'admin'; known roles: viewer, lead"),
    ("default: admin\n", "roles.yaml:1: default: unknown role 'admin'; known roles: viewer, lead"),
    ("groups:\n  ops: lead\n  sre: owner\n",
     "roles.yaml:3: groups.sre: unknown role 'owner'; known roles: viewer, lead"),
    ("users:\n  alice: lead\n",
     "roles.yaml:2: users.alice: expected an email (alice@example.com) or a domain pattern (*@example.com), "
     "got 'alice'"),
    ("users:\n  '*.example.com': lead\n", "roles.yaml:2: users.*.example.com: expected an email"),
    ("users:\n  'a*@example.com': lead\n", "roles.yaml:2: users.a*@example.com: expected an email"),
    ("users:\n  'a@b@example.com': lead\n", "roles.yaml:2: users.a@b@example.com: expected an email"),
    ("users:\n  '@example.com': lead\n", "roles.yaml:2: users.@example.com: expected an email"),
    ("users:\n  a@example.com: lead\n  A@EXAMPLE.COM: viewer\n",
     "roles.yaml:3: users.A@EXAMPLE.COM: duplicate entry (first at line 2; emails are compared in lower case)"),
    ("users:\n  a@example.com: lead\n  a@example.com: viewer\n", "roles.yaml:3: users.a@example.com: duplicate key"),
    ("users:\n  a@example.com: [lead]\n", "roles.yaml:2: users.a@example.com: expected a string, got a list"),
    ("users:\n  - a@example.com\n", "roles.yaml:2: users: expected a mapping, got a list"),
    ("leads:\n  - a@example.com\n", "roles.yaml:1: leads: unknown key 'leads'; expected one of: version, default, "
                                    "groups_claim, users, groups"),
    ("version: 2\n", "roles.yaml:1: version: must be <= 1, got 2"),
    ("groups_claim: ''\n", "roles.yaml:1: groups_claim: expected a non-empty string"),
    ("users: {a@example.com: lead\n", "roles.yaml:2: YAML syntax error"),
    ("", "roles.yaml: empty file; expected a mapping with users, groups and default"),
    ("- lead\n", "roles.yaml:1: expected a mapping, got a list"),
])
def test_bad_files_name_the_line_and_what_was_expected(text: str, expected: str) -> None:
    with pytest.raises(RolesError) as err:
        load_roles_text(text, "roles.yaml")
    assert str(err.value).startswith(expected), str(err.value)


def test_every_problem_is_reported_at_once() -> None:
    with pytest.raises(RolesError) as err:
        load_roles_text("default: root\nusers:\n  x: lead\ngroups:\n  g: admin\n", "r.yaml")
    assert [(p.line, p.path) for p in err.value.problems] == [(1, "default"), (3, "users.x"), (5, "groups.g")]


def test_empty_sections_are_allowed() -> None:
    assert load_roles_text("users:\ngroups:\n", "r.yaml") == RoleMap(source="r.yaml")


def test_a_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(RolesError, match=r"nope\.yaml: file not found"):
        load_roles(tmp_path / "nope.yaml")


M = load_roles_text(GOOD, "roles.yaml")


@pytest.mark.parametrize(("email", "groups", "role", "why"), [
    # the exact email wins over everything: bob is a viewer although example.com is lead and his group is lead
    ("bob@example.com", ("platform-leads",), VIEWER, "bob@example.com is listed in roles.yaml"),
    ("ALICE@example.com", (), LEAD, "alice@example.com is listed in roles.yaml"),  # emails ignore case
    # groups come before the domain: the highest role among the user's groups
    ("carol@contractor.example", ("oncall", "platform-leads"), LEAD, "member of group 'platform-leads' in roles.yaml"),
    ("dave@example.com", ("oncall",), VIEWER, "member of group 'oncall' in roles.yaml"),
    ("dave@example.com", ("Platform-Leads",), LEAD, "*@example.com in roles.yaml"),  # group names keep their case
    ("erin@example.com", (), LEAD, "*@example.com in roles.yaml"),
    ("erin@sub.example.com", (), VIEWER, "the default role of roles.yaml"),  # a domain pattern is not a suffix
    ("frank@contractor.example", (), VIEWER, "*@contractor.example in roles.yaml"),
    ("grace@elsewhere.org", ("unknown-group",), VIEWER, "the default role of roles.yaml"),
    (None, (), VIEWER, "the default role of roles.yaml"),
])
def test_matching_and_precedence(email: str | None, groups: tuple[str, ...], role: str, why: str) -> None:
    assert M.role_for(email, groups) == (role, why)


def test_the_default_role_is_configurable() -> None:
    m = load_roles_text("default: lead\nusers:\n  x@y.org: viewer\n", "r.yaml")
    assert m.role_for("anyone@else.org") == (LEAD, "the default role of r.yaml")
    assert m.role_for("x@y.org")[0] == VIEWER
    assert RoleMap().role_for("anyone@else.org")[0] == VIEWER  # no roles file: everyone identified is a viewer


def test_the_example_roles_file_is_valid() -> None:
    m = load_roles(REPO / "examples" / "roles.yaml")
    assert LEAD in set(m.users.values()) | set(m.domains.values()) | set(m.groups.values())


def test_the_deploy_guides_roles_file_is_valid_and_means_what_it_says() -> None:
    guide = (REPO / "docs" / "deploy.md").read_text()
    text = guide.split("### The roles file", 1)[1].split("```yaml\n", 1)[1].split("```", 1)[0]
    m = load_roles_text(text, "deploy.md")
    assert m.role_for("intern@example.com")[0] == VIEWER and m.role_for("bob@example.com")[0] == LEAD
    assert m.role_for("x@sub.example.com")[0] == VIEWER and m.role_for("x@y.org", ("platform-leads",))[0] == LEAD
