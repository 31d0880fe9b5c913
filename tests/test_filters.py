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


@pytest.fixture
def one_pool(demo_db: Path, monkeypatch: pytest.MonkeyPatch) -> AppTest:
    """A console session with POOL picked in the sidebar; each test switches it from page to page."""
    return narrowed(demo_db, monkeypatch, POOL)


def narrowed(db: Path, monkeypatch: pytest.MonkeyPatch, pool: str) -> AppTest:
    """A console session with one pool picked in the sidebar."""
    monkeypatch.setenv(ENV_DB, str(db))
    at = AppTest.from_file(MAIN, default_timeout=120).run()
    at.multiselect(key="pools").set_value([pool]).run()
    return at


def on(at: AppTest, page: str) -> AppTest:
    """The session on another page, the sidebar as it was."""
    at = at.switch_page(page).run()
    assert not at.exception, at.exception
    assert at.multiselect(key="pools").value == [POOL] or page.endswith("onboarding.py")
    return at


def table(at: AppTest, column: str) -> pd.DataFrame:
    """The first wrapping table with that column, as the reader sees it."""
    return next(t.value for t in at.table if column in t.value.columns).map(plain)


def grids(at: AppTest, column: str) -> list[pd.DataFrame]:
    """Every st.dataframe with that column."""
    return [d.value for d in at.dataframe if column in d.value.columns]


def test_every_page_that_lists_pools_shows_the_pool_alone(one_pool: AppTest) -> None:
    at = on(one_pool, "screens/health.py")
    cards = [m.value.split("**")[1] for m in at.markdown if m.value.startswith("**")]
    assert cards == [POOL] and len(at.metric) == 8
    for grid in grids(at, "pool"):
        assert set(grid["pool"]) <= {POOL}
    at = on(at, "screens/reliability.py")
    assert list(table(at, "R")["pool"]) == [POOL]
    events = grids(at, "pool")
    assert events and all(set(g["pool"]) <= {POOL} for g in events)
    at = on(at, "screens/versions.py")
    assert list(table(at, "driver")["pool"]) == [POOL]
    grid = table(at, "model")
    assert list(grid.columns) == ["model", POOL]
    assert set(table(at, "failing requirement")["pool"]) == {POOL}
    at = on(at, "screens/cost.py")
    assert list(at.dataframe[0].value["pool"]) == [POOL]
    assert at.metric[0].label == "Pool cost per hour"  # not "Fleet cost per hour" for one pool
    at = on(at, "screens/fleet.py")
    assert list(table(at, "chip")["pool"]) == [POOL]
    assert at.metric[0].value == "1"
    at = on(at, "screens/export.py")
    assert any(c.value.endswith(f"pools: {POOL} (change both in the sidebar)") for c in at.caption)
    assert set(at.dataframe[0].value["pool"]) == {POOL}


def test_onboarding_shows_the_pools_picked_or_says_none_is_onboarding(demo_db: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    at = on(narrowed(demo_db, monkeypatch, "mlu370-a"), "screens/onboarding.py")
    cards = [m.value.split("**")[1] for m in at.markdown if " · started " in m.value]
    assert cards == ["mlu370-a"]
    assert at.selectbox(key="onboarding_detail").options == ["mlu370-a"]
    assert any("1 of the 2 pools being onboarded" in c.value for c in at.caption)
    at = on(narrowed(demo_db, monkeypatch, "h100-a"), "screens/onboarding.py")
    assert at.info[0].value == ("None of the pools picked in the sidebar is being onboarded; these are: gaudi3-a, "
                                "mlu370-a.")


@pytest.mark.parametrize(("page", "said"), [
    ("screens/collectors.py", "The sidebar's pool filter does not apply here: an ingest run is recorded by its "
                              "source"),
    ("screens/replay.py", "The sidebar's pools narrow the Calibration tab alone: a replay routes over the whole "
                          "fleet"),
])
def test_pages_it_cannot_narrow_say_why(one_pool: AppTest, page: str, said: str) -> None:
    at = on(one_pool, page)
    assert any(c.value.startswith(said) for c in at.caption)
