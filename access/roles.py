"""The one loader for the console's roles YAML: emails, email domains and groups mapped to viewer or lead."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from yaml.nodes import Node

from pool_registry.yamlread import ConfigError, Reader, read_text

ENV_ROLES = "HETPOOL_ROLES"
VIEWER, LEAD = "viewer", "lead"
ROLES = (VIEWER, LEAD)  # in rising order of rights
DEFAULT_ROLE = VIEWER
DEFAULT_GROUPS_CLAIM = "groups"
REFUSE = "refuse"
UNVERIFIED = (VIEWER, REFUSE)  # what an unverified email gets: a viewer at most, or no access


class RolesError(ConfigError):
    """A roles file that cannot be used."""


@dataclass(frozen=True)
class RoleMap:
    """Who gets which role: exact emails, `*@domain` patterns and groups, and the role of everyone else."""

    users: dict[str, str] = field(default_factory=dict)    # lower-cased email -> role
    domains: dict[str, str] = field(default_factory=dict)  # lower-cased domain -> role
    groups: dict[str, str] = field(default_factory=dict)   # group name (as the identity provider spells it) -> role
    default: str = DEFAULT_ROLE
    groups_claim: str = DEFAULT_GROUPS_CLAIM
    source: str = ""  # the roles file; empty when none is configured
    unverified_email: str = VIEWER

    def role_for(self, email: str | None, groups: tuple[str, ...] = ()) -> tuple[str, str]:
        """(role, why): the exact email wins, else the highest role of the user's groups, else the email's domain,
        else the default. An exact entry can so demote one person of a lead group or domain."""
        address = (email or "").strip().lower()
        if address in self.users:
            return self.users[address], f"{address} is listed in {self.source}"
        by_group = [(ROLES.index(self.groups[g]), g) for g in groups if g in self.groups]
        if by_group:
            rank, group = max(by_group)
            return ROLES[rank], f"member of group {group!r} in {self.source}"
        domain = address.rpartition("@")[2] if "@" in address else ""
        if domain in self.domains:
            return self.domains[domain], f"*@{domain} in {self.source}"
        if not self.source:
            return self.default, f"no roles file is configured, so everyone signed in is a {self.default}"
        return self.default, f"the default role of {self.source}"


def roles_path(explicit: str | Path | None = None) -> Path | None:
    """The roles file: the explicit path (a secrets key), else $HETPOOL_ROLES, else none."""
    chosen = explicit or os.environ.get(ENV_ROLES)
    return Path(chosen) if chosen else None


def load_roles(path: str | Path) -> RoleMap:
    """Read and validate a roles file; RolesError lists every problem with file, line and field."""
    return load_roles_text(read_text(path, RolesError), str(path))


def load_roles_text(text: str, source: str = "<roles>") -> RoleMap:
    """Validate roles YAML; raise RolesError listing every problem."""
    r = Reader(source)
    root = r.root(text, "a mapping with users, groups and default", RolesError)
    top = r.mapping(root, "", required=(), optional=("version", "default", "groups_claim", "users", "groups",
                                                      "unverified_email"))
    if "version" in top:
        r.integer(top["version"], "version", ge=1, le=1)
    default = _role(r, top["default"], "default") if "default" in top else DEFAULT_ROLE
    claim = r.string(top["groups_claim"], "groups_claim") if "groups_claim" in top else DEFAULT_GROUPS_CLAIM
    unverified = r.choice(top["unverified_email"], "unverified_email", UNVERIFIED) if "unverified_email" in top \
        else VIEWER
    users: dict[str, str] = {}
    domains: dict[str, str] = {}
    seen: dict[str, int] = {}
    for key, node in _entries(r, top, "users").items():
        path = f"users.{key}"
        name = key.strip().lower()
        local, at, domain = name.rpartition("@")
        line = node.start_mark.line + 1
        if not at or not local or not domain or "@" in local or " " in name or (local != "*" and "*" in local):
            r.fail(node, path, f"expected an email (alice@example.com) or a domain pattern (*@example.com), "
                               f"got {key!r}")
            continue
        if name in seen:  # the same address in other capitals
            r.fail(node, path, f"duplicate entry (first at line {seen[name]}; emails are compared in lower case)")
            continue
        seen[name] = line
        (domains if local == "*" else users)[domain if local == "*" else name] = _role(r, node, path)
    groups = {key: _role(r, node, f"groups.{key}")
              for key, node in _entries(r, top, "groups").items()}
    if r.problems:
        raise RolesError(r.problems)
    return RoleMap(users=users, domains=domains, groups=groups, default=default, groups_claim=claim, source=source,
                   unverified_email=unverified)


def _entries(r: Reader, top: dict[str, Node], key: str) -> dict[str, Node]:
    """A section's entries; an empty section (`users:` with nothing under it) has none."""
    node = top.get(key)
    if node is None or node.tag == "tag:yaml.org,2002:null":
        return {}
    return r.free_mapping(node, key)


def _role(r: Reader, node: Node, path: str) -> str:
    value = r.text(node, path)
    if value and value not in ROLES:
        r.fail(node, path, f"unknown role {value!r}; known roles: {', '.join(ROLES)}")
        return DEFAULT_ROLE
    return value
