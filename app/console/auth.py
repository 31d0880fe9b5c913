"""Console access in Streamlit: who the user is (OIDC login, a trusted proxy header, or local), their role, the
sidebar's "signed in as", and the check every guarded action makes on the server before it writes.

Which deployment applies is read from Streamlit secrets and the environment on every run:
- `[auth]` in secrets.toml: Streamlit's OIDC login (`st.login`); the user is `st.user`.
- else `HETPOOL_TRUSTED_HEADER` (or the `hetpool_trusted_header` secret): an auth proxy in front passes the
  user's email in that header (groups, comma-separated, in `HETPOOL_TRUSTED_GROUPS_HEADER`);
- else local use: the one who runs the console is a lead.
The roles file is `HETPOOL_ROLES` or the `hetpool_roles` secret. Secrets are read, never shown or logged.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import streamlit as st

from access import (
    AccessDenied,
    Decision,
    Identity,
    RoleMap,
    RolesError,
    decide,
    from_claims,
    from_headers,
    load_roles,
)
from access.identity import HEADER, LOCAL, LOCAL_USER, OIDC
from access.policy import beyond_loopback
from access.roles import ENV_ROLES, roles_path
from app.console.safe import md

ENV_HEADER, ENV_GROUPS_HEADER = "HETPOOL_TRUSTED_HEADER", "HETPOOL_TRUSTED_GROUPS_HEADER"
SECRET_HEADER, SECRET_GROUPS_HEADER, SECRET_ROLES = ("hetpool_trusted_header", "hetpool_trusted_groups_header",
                                                     "hetpool_roles")
DECISION_KEY = "_hetpool_access"
_SHARED = {"redirect_uri", "cookie_secret", "expose_tokens", "client_id", "client_secret", "server_metadata_url",
           "client_kwargs"}


@dataclass(frozen=True)
class Setup:
    """The deployment's access settings: mode (oidc, header, local), OIDC providers, header names, roles file."""

    mode: str
    providers: tuple[str | None, ...] = ()  # None is the unnamed provider of [auth] itself
    header: str | None = None
    groups_header: str | None = None
    roles: str | None = None


def _secret(key: str) -> Any:
    try:
        return st.secrets.get(key)
    except (FileNotFoundError, KeyError, st.errors.StreamlitSecretNotFoundError):
        return None


def providers_of(auth: Mapping[str, Any]) -> tuple[str | None, ...]:
    """The providers an `[auth]` section configures: itself when it holds client_id, and each named sub-table."""
    named = tuple(str(k) for k, v in auth.items() if k not in _SHARED and isinstance(v, Mapping))
    return ((None,) if "client_id" in auth else ()) + named


def setup() -> Setup:
    """Read the access settings of this deployment from secrets and the environment."""
    chosen = os.environ.get(ENV_ROLES) or _secret(SECRET_ROLES)
    roles = str(chosen) if chosen else None
    auth = _secret("auth")
    if isinstance(auth, Mapping) and auth:
        return Setup(OIDC, providers_of(auth) or (None,), roles=roles)
    header = os.environ.get(ENV_HEADER) or _secret(SECRET_HEADER)
    if header:
        groups = os.environ.get(ENV_GROUPS_HEADER) or _secret(SECRET_GROUPS_HEADER)
        return Setup(HEADER, header=str(header), groups_header=str(groups) if groups else None, roles=roles)
    return Setup(LOCAL, roles=roles)


def read_headers() -> Mapping[str, str]:
    """The headers of the request that opened this session (the proxy's, in front of the console)."""
    return {k: v for k, v in st.context.headers.items()}


def read_claims() -> Mapping[str, object]:
    """The logged-in user's OIDC claims."""
    return st.user.to_dict()


def identify(s: Setup, roles: RoleMap | None, headers: Callable[[], Mapping[str, str]] | None = None,
             claims: Callable[[], Mapping[str, object]] | None = None) -> Identity | None:
    """The user of this session under the deployment's mode; None when nobody is logged in. The sources default
    to this module's readers, looked up at each call."""
    if s.mode == OIDC:
        return from_claims((claims or read_claims)(), (roles or RoleMap()).groups_claim)
    if s.mode == HEADER and s.header:
        return from_headers((headers or read_headers)(), s.header, s.groups_header)
    return LOCAL_USER


def gate() -> Decision | None:
    """Decide who the user is and their role, and show it in the sidebar; None (with a login button or the reason
    drawn) when the pages must not run."""
    st.session_state.pop(DECISION_KEY, None)
    s = setup()
    try:
        path = roles_path(s.roles) if s.mode != LOCAL else None
        roles = load_roles(path) if path is not None else None
    except RolesError as exc:
        st.error(f"The console's roles file cannot be used: {exc}")
        return None
    exposed = exposed_address() if s.mode == LOCAL else None
    try:
        decision = decide(identify(s, roles), roles, exposed_at=exposed)
    except AccessDenied as exc:
        st.title("hetpool")
        st.error(f"Access refused: {md(str(exc))}.")
        return None
    if decision is None:
        _logged_out(s)
        return None
    st.session_state[DECISION_KEY] = decision
    _sidebar(decision, s)
    if exposed is not None:
        st.sidebar.warning(f"This console listens on {md(exposed)} with no login, so everyone who reaches it is a "
                           "viewer. To let leads save runs and add evidence, configure a login (Streamlit's `[auth]` "
                           "OIDC or an auth proxy's trusted header) and a roles file: see docs/deploy.md, "
                           "Console access.")
    return decision


def exposed_address(address: str | None = None) -> str | None:
    """The address the console listens on when it is beyond loopback; None on loopback, and when no address is
    set (as under AppTest, which serves nobody)."""
    value = (address if address is not None else str(st.get_option("server.address") or "")).strip()
    return value if value and beyond_loopback(value) else None


def current() -> Decision | None:
    """The user's decision made at the start of this run; None when nobody is identified."""
    found = st.session_state.get(DECISION_KEY)
    return found if isinstance(found, Decision) else None


def _logged_out(s: Setup) -> None:
    st.title("hetpool")
    if s.mode == HEADER:
        st.error(f"This console expects the signed-in user in the `{s.header}` header, set by the authenticating "
                 "proxy in front of it, and this request carried none. Open it through the proxy.")
        return
    st.info("Log in to open the console.")
    for provider in s.providers:
        label = "Log in" if provider is None else f"Log in with {provider}"
        if st.button(label, key=f"auth.login.{provider or 'default'}", type="primary"):
            st.login(provider)


def _sidebar(decision: Decision, s: Setup) -> None:
    box = st.sidebar.container(border=True)
    box.markdown(f"Signed in as **{md(decision.identity.label)}** · role **{decision.role}**")
    box.caption(f"Why: {md(decision.why)}.")
    if s.mode == OIDC and box.button("Log out", key="auth.logout"):
        st.logout()
        # nothing more of this run: its pages were decided for the user who just left, and the browser is on its
        # way to the logout endpoint, which drops the identity cookie
        st.stop()

