"""The console's fleet page, run by Streamlit's AppTest against real DuckDB files."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from app.console.tables import plain
from pool_registry import Registry
from store import ENV_DB, connect
from tests.conftest import REPO

MAIN = str(REPO / "app" / "console" / "main.py")


def app_for(db: Path, monkeypatch: pytest.MonkeyPatch) -> AppTest:
    monkeypatch.setenv(ENV_DB, str(db))
    return AppTest.from_file(MAIN, default_timeout=60).run()


def test_fleet_page_lists_pools_from_the_registry(fleet_db: Path, fleet: Registry,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    at = app_for(fleet_db, monkeypatch).switch_page("screens/fleet.py").run()
    assert not at.exception
    assert at.title[0].value == "Fleet registry"
    shown = at.table[0].value.map(plain)  # a table that wraps: every cell whole, as the reader sees it
    assert list(shown["pool"]) == [p.id for p in fleet.pools]
    assert list(shown["devices"]) == ["64", "32", "64", "32", "16", "8"]
    # 64 x 3.20 + 32 x 2.60 + 64 x 1.50 + 32 x 2.10 + 16 x 0.90 + 8 x 3.20 = 491.20 dollars per hour
    metrics = {m.label: m.value for m in at.metric}
    assert metrics == {"Pools": "6", "Devices": "216", "Cost per hour": "$491.20", "Vendors": "5"}
    h100 = shown[shown["pool"] == "h100-a"].iloc[0]
    assert h100["cost per hour"] == "$204.80"
    assert h100["stack"] == "cuda 12.4, driver 550.144.03, vllm 0.15.1"


def test_fleet_page_on_an_empty_database_explains_what_to_do(db_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    connect(db_path).close()
    at = app_for(db_path, monkeypatch)
    assert not at.exception
    assert "hetpool registry load" in at.info[0].value


def test_missing_database_is_an_error_message_not_a_traceback(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    at = app_for(tmp_path / "absent.duckdb", monkeypatch)
    assert not at.exception
    assert "does not exist; run 'hetpool init'" in at.error[0].value
