"""Who is using the console: read from OIDC claims or from a trusted proxy header, never from anything else."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

OIDC, HEADER, LOCAL = "oidc", "header", "local"


@dataclass(frozen=True)
class Identity:
    """A user: their email (None for a local user), a display name, their groups, and how they were known."""

    email: str | None
    name: str
    groups: tuple[str, ...] = ()
    source: str = LOCAL
    unverified: str | None = None  # an email the identity provider sent without verifying it: never matched

    @property
    def label(self) -> str:
        """How the sidebar names the user."""
        if self.unverified:
            return f"{self.name} ({self.unverified}, not verified)"
        if self.email and self.name and self.name != self.email:
            return f"{self.name} ({self.email})"
        return self.email or self.name


LOCAL_USER = Identity(None, "local user", (), LOCAL)


def from_claims(claims: Mapping[str, object], groups_claim: str = "groups") -> Identity | None:
    """The logged-in user of an OIDC identity token's claims, or None when nobody is logged in.

    Only an email the provider marks verified (`email_verified` true) identifies the user; any other email,
    and `preferred_username`, which the user may choose, only name them."""
    if not claims.get("is_logged_in"):
        return None
    email = _text(claims.get("email"))
    address = email.lower() if email and "@" in email else email
    verified = claims.get("email_verified") is True or str(claims.get("email_verified")).lower() == "true"
    name = (_text(claims.get("name")) or email or _text(claims.get("preferred_username")) or _text(claims.get("sub"))
            or "unnamed user")
    groups = _groups(claims.get(groups_claim))
    if address and not verified:
        return Identity(None, name, groups, OIDC, unverified=address)
    return Identity(address, name, groups, OIDC)


def from_headers(headers: Mapping[str, str], email_header: str, groups_header: str | None = None) -> Identity | None:
    """The user an auth proxy put in `email_header` (and groups, comma-separated, in `groups_header`); None when
    the request carried no such header. Header names are matched without regard to case, as HTTP does."""
    folded = {k.lower(): v for k, v in headers.items()}
    email = folded.get(email_header.lower(), "").strip()
    if not email:
        return None
    groups = folded.get(groups_header.lower(), "") if groups_header else ""
    return Identity(email.lower(), email.lower(), _groups(groups), HEADER)


def _text(value: object) -> str | None:
    return value.strip() if isinstance(value, str) and value.strip() else None


def _groups(value: object) -> tuple[str, ...]:
    """Groups as a claim list, or as one comma-separated string (how proxies pass them in a header)."""
    if isinstance(value, str):
        items: list[object] = list(value.split(","))
    elif isinstance(value, list | tuple):
        items = list(value)
    else:
        return ()
    return tuple(dict.fromkeys(s.strip() for s in items if isinstance(s, str) and s.strip()))
