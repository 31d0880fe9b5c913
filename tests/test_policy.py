"""Who may do what: a lead saves runs and adds evidence, a viewer is refused with the reason."""

from __future__ import annotations

import pytest

from access import ACTIONS, LEAD, VIEWER, AccessDenied, Identity, decide, load_roles_text, require
from access.identity import HEADER, LOCAL_USER, OIDC

ROLES = load_roles_text("users:\n  lead@x.org: lead\n", "roles.yaml")
LEAD_USER = Identity("lead@x.org", "Lee", (), OIDC)
VIEWER_USER = Identity("v@x.org", "v@x.org", (), HEADER)


@pytest.mark.parametrize("action", list(ACTIONS))
def test_a_lead_may_and_a_viewer_may_not(action: str) -> None:
    lead, viewer = decide(LEAD_USER, ROLES), decide(VIEWER_USER, ROLES)
    assert lead is not None and viewer is not None
    assert (lead.role, viewer.role) == (LEAD, VIEWER)
    require(lead, action)
    assert lead.reason(action) is None
    with pytest.raises(AccessDenied) as err:
        require(viewer, action)
    assert str(err.value) == viewer.reason(action)
    assert str(err.value).startswith(f"Only a lead can {ACTIONS[action][1]}; v@x.org is a viewer "
                                     "(the default role of roles.yaml)")


def test_nobody_logged_in_is_refused() -> None:
    assert decide(None, ROLES) is None
    with pytest.raises(AccessDenied, match="nobody is logged in; log in to save replay runs"):
        require(None, "save_replay_run")


def test_a_local_user_without_login_is_a_lead_whatever_the_roles_say() -> None:
    local = decide(LOCAL_USER, load_roles_text("default: viewer\n", "r.yaml"))
    assert local is not None and local.role == LEAD and local.allows("add_evidence")


def test_an_unknown_action_is_named() -> None:
    lead = decide(LEAD_USER, ROLES)
    assert lead is not None
    with pytest.raises(KeyError, match="unknown action 'delete'; known: save_replay_run, add_evidence, silence_alerts"):
        lead.allows("delete")
