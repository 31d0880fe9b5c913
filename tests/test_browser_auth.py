"""Console access in a real headless Chromium against a running `hetpool console`: the whole OIDC login through
a provider on loopback (st.login, the callback, st.user, st.logout), and a trusted proxy header."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from tests.oidc_provider import serve
from tests.processes import chromium, running_console

pytestmark = [pytest.mark.browser, pytest.mark.slow]  # headless Chromium through a login
ROLES = "users:\n  lee@example.com: lead\n"


@pytest.fixture
def roles(tmp_path: Path) -> Path:
    path = tmp_path / "roles.yaml"
    path.write_text(ROLES)
    return path


def wait_until_logged_out(page: Any, seen: list[str], timeout_s: float = 60.0) -> None:
    """Wait until the browser holds no Streamlit identity cookie (its name, or a chunk of it); `seen` is what the
    page requested and was answered since the logout, for the message when it does not happen."""
    deadline = time.monotonic() + timeout_s
    while any(c["name"].startswith("_streamlit_user") for c in page.context.cookies()):
        assert time.monotonic() < deadline, f"the identity cookie outlived the logout; the page at {page.url}, " \
                                            f"its documents since: {seen}"
        page.wait_for_timeout(100)  # the browser's events go on being handled while waiting


def test_an_oidc_login_and_logout_in_chromium(fleet_db: Path, tmp_path: Path, roles: Path) -> None:

    claims = {"email": "Lee@Example.com", "name": "Lee", "email_verified": True}
    with serve("hetpool-console", "client-secret-placeholder", claims) as idp:
        secrets = tmp_path / "secrets.toml"
        # the redirect URI names the console's port, filled in when it starts
        secrets.write_text(f'hetpool_roles = "{roles}"\n[auth]\n'
                           'redirect_uri = "http://127.0.0.1:{port}/oauth2callback"\n'
                           'cookie_secret = "cookie-secret-placeholder-0123456789"\n'
                           'client_id = "hetpool-console"\nclient_secret = "client-secret-placeholder"\n'
                           f'server_metadata_url = "{idp.base}/.well-known/openid-configuration"\n')
        with running_console(fleet_db, tmp_path, ["--secrets", str(secrets)]) as url, chromium() as browser:
            page = browser.new_page()
            page.goto(url)
            page.get_by_text("Log in to open the console.").wait_for(timeout=60_000)
            assert page.get_by_text("Fleet health").count() == 0  # no page before the login
            page.get_by_role("button", name="Log in").click()
            page.get_by_text("Signed in as Lee (lee@example.com) · role lead").wait_for(timeout=60_000)
            assert idp.tokens_issued == 1
            seen: list[str] = []
            page.on("response", lambda r: seen.append(f"{r.status} {r.url}")
                    if r.request.resource_type == "document" else None)
            page.get_by_role("button", name="Log out").click()
            page.get_by_text("Log in to open the console.").wait_for(timeout=60_000)
            # the session shows the login at once; the browser drops the identity cookie when its logout
            # request comes back, which on a loaded machine can be after that: reload only once it has
            wait_until_logged_out(page, seen)
            page.reload()  # the identity cookie is gone: still logged out
            page.get_by_text("Log in to open the console.").wait_for(timeout=60_000)
            assert page.get_by_text("Signed in as").count() == 0


def test_a_trusted_proxy_header_in_chromium(fleet_db: Path, tmp_path: Path, roles: Path) -> None:
    env = {"HETPOOL_TRUSTED_HEADER": "X-Forwarded-Email", "HETPOOL_ROLES": str(roles)}
    with running_console(fleet_db, tmp_path, [], env) as url, chromium() as browser:
        for sent, shown in (("lee@example.com", "Signed in as lee@example.com · role lead"),
                            (None, "expects the signed-in user in the X-Forwarded-Email header")):
            context = browser.new_context(extra_http_headers={"X-Forwarded-Email": sent} if sent else {})
            page = context.new_page()
            page.goto(url)
            page.get_by_text(shown).wait_for(timeout=60_000)
            context.close()
