"""Console access under Streamlit's AppTest: OIDC login (st.user seeded by AppTest), a trusted proxy header,
and local use; only a lead saves replay runs and adds onboarding evidence, checked again on the server."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from access import AccessDenied, decide, from_claims, load_roles
from app.console import auth, writes
from app.console.safe import md
from app.console.whatif.results import RESULT_KEY
from tests.logins import LEAD, VIEWER, console, count, private_copy, write_roles


@pytest.fixture
def roles(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return write_roles(tmp_path, monkeypatch)


def signed_in(at: AppTest) -> list[str]:
    return [m.value for m in at.sidebar.markdown if m.value.startswith("Signed in as")]


def test_local_use_is_a_lead_without_login(fleet_db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    at = console(fleet_db, monkeypatch).run()
    assert not at.exception
    assert signed_in(at) == ["Signed in as **local user** · role **lead**"]
    assert "auth.logout" not in [b.key for b in at.sidebar.button]


def test_oidc_without_a_login_shows_a_button_per_provider_and_no_page(fleet_db: Path, roles: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    at = console(fleet_db, monkeypatch, {"is_logged_in": False}).run()
    assert not at.exception
    assert [b.label for b in at.button] == ["Log in", "Log in with okta"]
    assert [i.value for i in at.info] == ["Log in to open the console."]
    assert not signed_in(at) and not at.sidebar.selectbox  # no page, no sidebar filters
    secrets = ("cookie-secret-placeholder", "client-secret-placeholder", "okta-secret")
    shown = " ".join(str(e.proto) for e in [*at.main, *at.sidebar])
    assert not any(s in shown for s in secrets)


@pytest.mark.parametrize(("user", "expected"), [
    (LEAD, "Signed in as **Lee (lee@example.com)** · role **lead**"),
    (VIEWER, "Signed in as **Val (val@example.com)** · role **viewer**"),
    ({**VIEWER, "groups": ["platform-leads"]}, "Signed in as **Val (val@example.com)** · role **lead**"),
])
def test_oidc_sidebar_names_the_user_and_role_with_logout(fleet_db: Path, roles: Path, user: dict[str, object],
                                                           expected: str, monkeypatch: pytest.MonkeyPatch) -> None:
    at = console(fleet_db, monkeypatch, user).run()
    assert not at.exception
    assert signed_in(at) == [expected]
    at.sidebar.button(key="auth.logout").click().run()
    assert at.user == {"is_logged_in": False}
    at.run()
    assert not signed_in(at) and [b.label for b in at.button] == ["Log in", "Log in with okta"]


def test_a_bad_roles_file_stops_the_console_with_its_line(fleet_db: Path, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    bad = tmp_path / "roles.yaml"
    bad.write_text("users:\n  lee@example.com: admin\n")
    monkeypatch.setenv("HETPOOL_ROLES", str(bad))
    at = console(fleet_db, monkeypatch, LEAD).run()
    assert [e.value for e in at.error] == [f"The console's roles file cannot be used: {bad}:2: users.lee@example.com: "
                                           "unknown role 'admin'; known roles: viewer, lead"]
    assert not signed_in(at)


def test_a_trusted_header_names_the_user(fleet_db: Path, roles: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # AppTest cannot send request headers; the header reader is the one injected part
    monkeypatch.setenv("HETPOOL_TRUSTED_HEADER", "X-Forwarded-Email")
    monkeypatch.setenv("HETPOOL_TRUSTED_GROUPS_HEADER", "X-Forwarded-Groups")
    headers = {"x-forwarded-email": "Val@Example.com", "x-forwarded-groups": "platform-leads"}
    monkeypatch.setattr(auth, "read_headers", lambda: headers)
    at = console(fleet_db, monkeypatch).run()
    assert signed_in(at) == ["Signed in as **val@example.com** · role **lead**"]
    assert "auth.logout" not in [b.key for b in at.sidebar.button]  # the proxy logs out, not the console
    headers.pop("x-forwarded-groups")
    assert signed_in(at.run()) == ["Signed in as **val@example.com** · role **viewer**"]
    headers.clear()
    at.run()
    assert not signed_in(at)
    assert at.error[0].value.startswith("This console expects the signed-in user in the `X-Forwarded-Email` header")


def test_the_header_is_ignored_unless_configured(fleet_db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HETPOOL_TRUSTED_HEADER", raising=False)
    monkeypatch.setattr(auth, "read_headers", lambda: {"x-forwarded-email": "val@example.com"})
    assert signed_in(console(fleet_db, monkeypatch).run()) == ["Signed in as **local user** · role **lead**"]


# -- the guarded actions ----------------------------------------------------------------------------------------

@pytest.fixture
def db(demo_db: Path, tmp_path: Path) -> Path:
    return private_copy(demo_db, tmp_path)


def test_only_a_lead_saves_a_replay_run(db: Path, roles: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    runs = count(db, "replay_runs")
    at = console(db, monkeypatch, VIEWER).run().switch_page("screens/replay.py").run()
    at.button(key="wi.run").click().run()
    assert not at.exception, at.exception
    save = at.button(key="wi.save")
    assert save.disabled and at.text_input(key="wi.save_name").disabled
    reason = ("Only a lead can save replay runs; Val (val@example.com) is a viewer "
              f"(the default role of {roles}).")
    assert reason in [c.value for c in at.caption]
    assert count(db, "replay_runs") == runs
    # a lead sees it enabled; were the role taken away before the click is handled, nothing is saved
    at.user = LEAD
    at.run()
    assert not at.button(key="wi.save").disabled
    at.user = VIEWER
    at.button(key="wi.save").click().run()
    assert not any(s.value.startswith("Saved as run ") for s in at.success)
    assert count(db, "replay_runs") == runs
    # and the write itself refuses a viewer, whatever the widgets did, before it opens the store
    record = at.session_state[RESULT_KEY].whatif.run_record("forged", None)
    viewer = decide(from_claims(VIEWER), load_roles(roles))
    with pytest.raises(AccessDenied, match=re.escape(reason)):
        writes.save_run(str(db), record, viewer)
    with pytest.raises(AccessDenied, match="nobody is logged in"):
        writes.save_run(str(db), record, None)
    assert count(db, "replay_runs") == runs
    at.user = LEAD
    at.run()
    at.button(key="wi.save").click().run()
    assert any(s.value.startswith("Saved as run ") for s in at.success), [s.value for s in at.success]
    assert count(db, "replay_runs") == runs + 1


def test_an_unverified_email_signs_in_as_a_viewer_whoever_it_names(fleet_db: Path, roles: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    at = console(fleet_db, monkeypatch, {"is_logged_in": True, "email": "lee@example.com", "email_verified": False,
                                         "name": "Mallory"}).run()
    assert not at.exception
    assert signed_in(at) == ["Signed in as **Mallory (lee@example.com, not verified)** · role **viewer**"]
    at = console(fleet_db, monkeypatch, {"is_logged_in": True, "preferred_username": "lee@example.com"}).run()
    assert signed_in(at) == ["Signed in as **lee@example.com** · role **viewer**"]


def test_unverified_emails_can_be_refused(fleet_db: Path, roles: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    roles.write_text(roles.read_text() + "unverified_email: refuse\n")
    at = console(fleet_db, monkeypatch, {"is_logged_in": True, "email": "lee@example.com", "name": "Mallory"}).run()
    assert not at.exception and not signed_in(at)
    assert [e.value for e in at.error] == [
        f"Access refused: the identity provider has not verified lee@example.com, and {md(roles)} refuses "
        "unverified emails."]


def test_off_loopback_without_a_login_every_visitor_is_a_viewer(fleet_db: Path, monkeypatch: pytest.MonkeyPatch,
                                                                ) -> None:
    monkeypatch.setattr(auth, "exposed_address", lambda address=None: "0.0.0.0")
    at = console(fleet_db, monkeypatch).run()
    assert not at.exception
    assert signed_in(at) == ["Signed in as **local user** · role **viewer**"]
    assert any("listens on 0.0.0.0 with no login" in w.value and "docs/deploy.md" in w.value
               for w in at.sidebar.warning)
    assert auth.exposed_address.__name__ == "<lambda>"
