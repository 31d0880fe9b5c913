"""The console's data access beside writers: busy waits end in a clear message, new commits and a replaced file
are seen at the next rerun, and no lock error ever reaches the page."""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

import pytest
import yaml
from streamlit.testing.v1 import AppTest

from app.cli import main
from app.console.tables import plain
from store import ENV_DB
from tests.conftest import REPO
from tests.holders import holding

MAIN = str(REPO / "app" / "console" / "main.py")


def page(db: Path, monkeypatch: pytest.MonkeyPatch, name: str = "screens/fleet.py") -> AppTest:
    monkeypatch.setenv(ENV_DB, str(db))
    return AppTest.from_file(MAIN, default_timeout=60).run().switch_page(name).run()


def shown(at: AppTest) -> str:
    return "\n".join(str(e.value) for e in [*at.error, *at.info, *at.warning, *at.success])


@pytest.fixture
def copy(demo_db: Path, tmp_path: Path) -> Path:
    db = tmp_path / "demo.duckdb"
    shutil.copy(demo_db, db)
    return db


def test_a_writer_that_keeps_the_database_too_long_is_named_not_a_lock_error(copy: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HETPOOL_LOCK_TIMEOUT", "2")
    with holding(copy, "exclusive", "hetpool ingest file big.prom"):
        at = page(copy, monkeypatch)
    text = shown(at)
    assert not at.exception
    assert "stayed busy" in text and "hetpool ingest file big.prom (pid" in text and "has been writing" in text
    assert "lock" not in text.lower().replace("unlock", "")


def test_a_short_commit_is_waited_out_and_the_page_renders(copy: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HETPOOL_LOCK_TIMEOUT", "20")
    with holding(copy, "exclusive", "hetpool registry load") as proc:
        threading.Timer(1.5, lambda: proc.stdin.close() if proc.stdin else None).start()
        at = page(copy, monkeypatch)
    assert not at.exception and not at.error
    assert at.title[0].value == "Fleet registry" and at.metric[0].value == "6"


def test_a_commit_is_seen_at_the_next_rerun(copy: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    example = str(REPO / "examples" / "exporters" / "dcgm-h100-a-01.prom")
    at = page(copy, monkeypatch, "screens/collectors.py")
    sources = [plain(s) for s in at.table[0].value["source"]]
    assert example not in sources and "demo h100-a-01" in sources  # the demo's own exporters are sources too
    assert main(["--db", str(copy), "ingest", "file", example]) == 0
    at.run()  # the rerun a reload or an auto-refresh makes: no cached answer of the older file is served
    assert example in [plain(s) for s in at.table[0].value["source"]]


def test_a_replaced_file_is_said_and_the_new_one_is_read(copy: Path, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    at = page(copy, monkeypatch)
    assert at.metric[0].value == "6"
    fleet = yaml.safe_load((REPO / "examples" / "fleet.yaml").read_text())
    fleet["pools"] = fleet["pools"][:2]
    two = tmp_path / "two.yaml"
    two.write_text(yaml.safe_dump(fleet))
    smaller = tmp_path / "smaller.duckdb"
    assert main(["--db", str(smaller), "registry", "load", str(two)]) == 0
    smaller.replace(copy)
    at.run()
    assert "was replaced by a new file since your last view" in shown(at)
    assert at.metric[0].value == "2"
