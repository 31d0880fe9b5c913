"""Console logins for AppTest: OIDC settings with placeholder secrets, a lead and a viewer, a roles file."""

from __future__ import annotations

import shutil
from pathlib import Path

import duckdb
import pytest
from streamlit.testing.v1 import AppTest

from store import ENV_DB
from tests.conftest import REPO

MAIN = str(REPO / "app" / "console" / "main.py")
AUTH = {"redirect_uri": "http://localhost:8501/oauth2callback", "cookie_secret": "cookie-secret-placeholder",
        "client_id": "client-id-placeholder", "client_secret": "client-secret-placeholder",
        "server_metadata_url": "https://idp.example/.well-known/openid-configuration",
        "okta": {"client_id": "okta-id", "client_secret": "okta-secret",
                 "server_metadata_url": "https://okta.example/.well-known/openid-configuration"}}
ROLES = "users:\n  lee@example.com: lead\ngroups:\n  platform-leads: lead\n"
LEAD = {"is_logged_in": True, "email": "lee@example.com", "email_verified": True, "name": "Lee"}
VIEWER = {"is_logged_in": True, "email": "val@example.com", "email_verified": True, "name": "Val"}


def write_roles(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The roles file (lee is a lead, and so is the platform-leads group), named by $HETPOOL_ROLES."""
    path = tmp_path / "roles.yaml"
    path.write_text(ROLES)
    monkeypatch.setenv("HETPOOL_ROLES", str(path))
    return path


def console(db: Path, monkeypatch: pytest.MonkeyPatch, user: dict[str, object] | None = None) -> AppTest:
    """The console on `db`, under OIDC when a user is given (else local use), not yet run."""
    monkeypatch.setenv(ENV_DB, str(db))
    at = AppTest.from_file(MAIN, default_timeout=120)
    if user is not None:
        at.secrets["auth"] = AUTH
        at.user = user
    return at


def private_copy(demo_db: Path, tmp_path: Path) -> Path:
    """A private copy of the demo database, so writes leave the shared one as it was."""
    copy = tmp_path / "demo.duckdb"
    shutil.copyfile(demo_db, copy)
    return copy


def count(db: Path, table: str) -> int:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return int(con.execute(f"SELECT count(*) FROM {table}").fetchall()[0][0])
    finally:
        con.close()
