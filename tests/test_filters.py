"""The sidebar's pool filter narrows every page that lists pools, under Streamlit's AppTest on the small demo; the
pages it cannot narrow say why."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from app.console.tables import plain
from store import ENV_DB
from tests.conftest import REPO

MAIN = str(REPO / "app" / "console" / "main.py")
POOL = "ascend-a"


def narrowed(db: Path, monkeypatch: pytest.MonkeyPatch, page: str, pool: str = POOL) -> AppTest:
    """The page with one pool picked in the sidebar."""
    monkeypatch.setenv(ENV_DB, str(db))
    at = AppTest.from_file(MAIN, default_timeout=120).run()
    at.multiselect(key="pools").set_value([pool]).run()
    at = at.switch_page(page).run()
    assert not at.exception, at.exception
    return at


def table(at: AppTest, column: str) -> pd.DataFrame:
    """The first wrapping table with that column, as the reader sees it."""
    return next(t.value for t in at.table if column in t.value.columns).map(plain)


def grids(at: AppTest, column: str) -> list[pd.DataFrame]:
    """Every st.dataframe with that column."""
    return [d.value for d in at.dataframe if column in d.value.columns]


def test_fleet_health_shows_the_pool_alone(demo_db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    at = narrowed(demo_db, monkeypatch, "screens/health.py")
    cards = [m.value.split("**")[1] for m in at.markdown if m.value.startswith("**")]
    assert cards == [POOL] and len(at.metric) == 8
    for grid in grids(at, "pool"):
        assert set(grid["pool"]) <= {POOL}


def test_errors_and_reliability_show_the_pool_alone(demo_db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    at = narrowed(demo_db, monkeypatch, "screens/reliability.py")
    assert list(table(at, "R")["pool"]) == [POOL]
    events = grids(at, "pool")
    assert events and all(set(g["pool"]) <= {POOL} for g in events)


def test_versions_show_the_pool_alone(demo_db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    at = narrowed(demo_db, monkeypatch, "screens/versions.py")
    assert list(table(at, "driver")["pool"]) == [POOL]
    grid = table(at, "model")
    assert list(grid.columns) == ["model", POOL]
    assert set(table(at, "failing requirement")["pool"]) == {POOL}


def test_cost_shows_the_pool_alone_and_names_its_tile(demo_db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    at = narrowed(demo_db, monkeypatch, "screens/cost.py")
    assert list(at.dataframe[0].value["pool"]) == [POOL]
    assert at.metric[0].label == "Pool cost per hour"  # not "Fleet cost per hour" for one pool


def test_onboarding_shows_the_pools_picked_or_says_none_is_onboarding(demo_db: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    at = narrowed(demo_db, monkeypatch, "screens/onboarding.py", "mlu370-a")
    cards = [m.value.split("**")[1] for m in at.markdown if " · started " in m.value]
    assert cards == ["mlu370-a"]
    assert at.selectbox(key="onboarding_detail").options == ["mlu370-a"]
    assert any("1 of the 2 pools being onboarded" in c.value for c in at.caption)
    at = narrowed(demo_db, monkeypatch, "screens/onboarding.py", "h100-a")
    assert at.info[0].value == ("None of the pools picked in the sidebar is being onboarded; these are: gaudi3-a, "
                                "mlu370-a.")


def test_the_fleet_registry_shows_the_pool_alone(demo_db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    at = narrowed(demo_db, monkeypatch, "screens/fleet.py")
    assert list(table(at, "chip")["pool"]) == [POOL]
    assert at.metric[0].value == "1"


def test_export_takes_the_pool_alone(demo_db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    at = narrowed(demo_db, monkeypatch, "screens/export.py")
    assert any(c.value.endswith(f"pools: {POOL} (change both in the sidebar)") for c in at.caption)
    assert set(at.dataframe[0].value["pool"]) == {POOL}


@pytest.mark.parametrize(("page", "said"), [
    ("screens/collectors.py", "The sidebar's pool filter does not apply here: an ingest run is recorded by its "
                              "source"),
    ("screens/replay.py", "The sidebar's pools narrow the Calibration tab alone: a replay routes over the whole "
                          "fleet"),
])
def test_pages_it_cannot_narrow_say_why(demo_db: Path, monkeypatch: pytest.MonkeyPatch, page: str, said: str) -> None:
    at = narrowed(demo_db, monkeypatch, page)
    assert any(c.value.startswith(said) for c in at.caption)
