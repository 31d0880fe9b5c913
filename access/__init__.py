"""Console access: who the user is, and which role (viewer or lead) the roles file gives them."""

from access.identity import Identity, from_claims, from_headers
from access.policy import ACTIONS, AccessDenied, Decision, decide, require
from access.roles import DEFAULT_ROLE, ENV_ROLES, LEAD, ROLES, VIEWER, RoleMap, RolesError, load_roles, load_roles_text

__all__ = [
    "ACTIONS", "DEFAULT_ROLE", "ENV_ROLES", "LEAD", "ROLES", "VIEWER", "AccessDenied", "Decision", "Identity",
    "RoleMap", "RolesError", "decide", "from_claims", "from_headers", "load_roles", "load_roles_text", "require",
]
