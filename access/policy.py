"""What each role may do, decided in one place, and the refusal the console turns into one clear line."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from access.identity import LOCAL, Identity
from access.roles import LEAD, REFUSE, ROLES, VIEWER, RoleMap

# action -> the least role allowed to do it, and how a refusal names the action
ACTIONS: dict[str, tuple[str, str]] = {
    "save_replay_run": (LEAD, "save replay runs"),
    "add_evidence": (LEAD, "add onboarding evidence"),
    "silence_alerts": (LEAD, "silence a node's alerts"),
    "save_runway": (LEAD, "store capacity runways"),
}


class AccessDenied(Exception):
    """The user's role does not allow the action."""


@dataclass(frozen=True)
class Decision:
    """A user, their role, and why they have it."""

    identity: Identity
    role: str
    why: str

    def allows(self, action: str) -> bool:
        """Whether the role may do the action."""
        least, _ = _action(action)
        return ROLES.index(self.role) >= ROLES.index(least)

    def reason(self, action: str) -> str | None:
        """None when allowed, else the one line a disabled control shows."""
        if self.allows(action):
            return None
        least, what = _action(action)
        return (f"Only a {least} can {what}; {self.identity.label} is a {self.role} ({self.why}).")


def decide(identity: Identity | None, roles: RoleMap | None, *, exposed_at: str | None = None) -> Decision | None:
    """The role of an identified user from the roles file (or its default without one).

    A local user with no login configured is a lead, as the console is then only reachable by whoever runs it;
    when it listens beyond loopback (`exposed_at`, the address) every visitor is a viewer. An email the identity
    provider has not verified is no identity: a viewer at most, or refused (AccessDenied) when the roles file
    says `unverified_email: refuse`."""
    if identity is None:
        return None
    if identity.source == LOCAL:
        if exposed_at is not None:
            return Decision(identity, VIEWER, f"the console listens on {exposed_at}, beyond this machine, with no "
                                              "login configured, so every visitor is a viewer")
        return Decision(identity, LEAD, "no login is configured, so a local user is a lead")
    rules = roles or RoleMap()
    if identity.unverified:
        if rules.unverified_email == REFUSE:
            raise AccessDenied(f"the identity provider has not verified {identity.unverified}, and "
                               f"{rules.source or 'the roles file'} refuses unverified emails")
        return Decision(identity, VIEWER, f"the identity provider has not verified {identity.unverified}, so no "
                                          "role is given for it")
    role, why = rules.role_for(identity.email, identity.groups)
    return Decision(identity, role, why)


def beyond_loopback(address: str) -> bool:
    """Whether a listening address is reachable from other machines (not 127.0.0.0/8, ::1 or localhost)."""
    host = address.strip().strip("[]").lower()
    if not host or host == "localhost":
        return not host  # an empty address binds every interface
    try:
        return not ipaddress.ip_address(host).is_loopback
    except ValueError:
        return True  # a host name other than localhost: reachable from elsewhere


def require(decision: Decision | None, action: str) -> None:
    """Raise AccessDenied unless the user may do the action (a check on the server, whatever the widgets showed)."""
    if decision is None:
        raise AccessDenied(f"nobody is logged in; log in to {_action(action)[1]}")
    refusal = decision.reason(action)
    if refusal is not None:
        raise AccessDenied(refusal)


def _action(action: str) -> tuple[str, str]:
    try:
        return ACTIONS[action]
    except KeyError:
        raise KeyError(f"unknown action {action!r}; known: {', '.join(ACTIONS)}") from None
