"""What each role may do, decided in one place, and the refusal the console turns into one clear line."""

from __future__ import annotations

from dataclasses import dataclass

from access.identity import LOCAL, Identity
from access.roles import LEAD, ROLES, RoleMap

# action -> the least role allowed to do it, and how a refusal names the action
ACTIONS: dict[str, tuple[str, str]] = {
    "save_replay_run": (LEAD, "save replay runs"),
    "add_evidence": (LEAD, "add onboarding evidence"),
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


def decide(identity: Identity | None, roles: RoleMap | None) -> Decision | None:
    """The role of an identified user from the roles file (or its default without one); a local user with no
    login configured is a lead, as the console is then only reachable by whoever runs it."""
    if identity is None:
        return None
    if identity.source == LOCAL:
        return Decision(identity, LEAD, "no login is configured, so a local user is a lead")
    role, why = (roles or RoleMap()).role_for(identity.email, identity.groups)
    return Decision(identity, role, why)


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
