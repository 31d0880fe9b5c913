"""The Onboarding page's add-evidence form under AppTest: a lead's file is checked and stored and the card
judges it; a viewer sees the form disabled and the write refuses them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from access import AccessDenied, decide, from_claims, load_roles
from app.console import writes
from app.console.tables import plain
from onboarding.files import uploaded_files
from store import connect, require_registry
from tests.logins import LEAD, VIEWER, console, count, private_copy, write_roles

PAGE = "screens/onboarding.py"
FAILING = b"op,max_abs_err,tol\nmatmul_bf16,0.02,0.01\nrms_norm,0.0004,0.001\n"


@pytest.fixture
def db(demo_db: Path, tmp_path: Path) -> Path:
    return private_copy(demo_db, tmp_path)


@pytest.fixture
def roles(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return write_roles(tmp_path, monkeypatch)


def open_onboarding(db: Path, monkeypatch: pytest.MonkeyPatch, user: dict[str, object]) -> AppTest:
    at = console(db, monkeypatch, user).run().switch_page(PAGE).run()
    assert not at.exception, at.exception
    return at


def operators_status(at: AppTest) -> str:
    cards = [m.value for m in at.markdown if " · started " in str(m.value)]
    tables = [t.value.map(plain) for t in at.table if "item" in t.value.columns]
    table = tables[next(i for i, c in enumerate(cards) if c.startswith("**mlu370-a**"))]
    return str(dict(zip(table["item"], table["status"], strict=True))["operators aligned"])


def test_a_lead_adds_a_file_and_the_card_judges_it(db: Path, roles: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    before = count(db, "onboarding_evidence")
    at = open_onboarding(db, monkeypatch, LEAD)
    assert operators_status(at) == "PASS"
    assert at.button(key="ev.add").disabled  # no file chosen yet
    at.selectbox(key="ev.pool").set_value("mlu370-a")
    assert at.selectbox(key="ev.item").value == "operators"
    at.file_uploader(key="ev.file.operators.file").set_value(
        ("ops.csv", b"op,max_abs_err,tol\nmatmul_bf16,n/a,0.01\n", "text/csv")).run()
    at.button(key="ev.add").click().run()
    assert [e.value for e in at.error] == ["ops.csv:2:2: column max_abs_err: expected a number, got 'n/a'"]
    assert count(db, "onboarding_evidence") == before
    at.file_uploader(key="ev.file.operators.file").set_value(("ops.csv", FAILING, "text/csv")).run()
    at.button(key="ev.add").click().run()
    assert not at.exception, at.exception
    assert [s.value for s in at.success] == ["mlu370-a operators: ops.csv checked and stored."]
    assert count(db, "onboarding_evidence") == before + 1
    assert operators_status(at) == "FAIL"  # matmul_bf16 0.02 over its tolerance 0.01
    at.selectbox(key="ev.item").set_value("regression").run()  # two files: baseline, then candidate
    assert [u.key for u in at.file_uploader if u.key.startswith("ev.")] == [
        "ev.file.regression.baseline", "ev.file.regression.candidate"]


def test_a_viewer_cannot_add_evidence(db: Path, roles: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    before = count(db, "onboarding_evidence")
    at = open_onboarding(db, monkeypatch, VIEWER)
    reason = ("Only a lead can add onboarding evidence; Val (val@example.com) is a viewer "
              f"(the default role of {roles}).")
    assert reason in [c.value for c in at.caption]
    assert at.button(key="ev.add").disabled and at.selectbox(key="ev.item").disabled
    assert at.file_uploader(key="ev.file.operators.file").disabled
    con = connect(db, read_only=True)
    try:
        files = uploaded_files(require_registry(con), "mlu370-a", "operators", [("ops.csv", FAILING.decode())])
    finally:
        con.close()
    with pytest.raises(AccessDenied, match=re.escape(reason)):
        writes.add_evidence(str(db), files, decide(from_claims(VIEWER), load_roles(roles)))
    assert count(db, "onboarding_evidence") == before
