"""The Replay page in a real headless Chromium: a run completes, the candidate YAML downloads and loads, the run
is saved and re-opened from the history. Screenshots go to test-artifacts/ for a person to look at."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from replay import load_candidate
from store import connect, require_registry
from tests.processes import ARTIFACTS, chromium, running_console

pytestmark = [pytest.mark.browser, pytest.mark.slow]  # headless Chromium through a replay


@pytest.fixture(scope="module")
def console(demo_db: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """`hetpool console` on a copy of the demo database (the test saves a run into it)."""
    db = tmp_path_factory.mktemp("replay-browser") / "demo.duckdb"
    shutil.copyfile(demo_db, db)
    with running_console(db, db.parent) as url:
        yield url, db


def test_a_replay_runs_saves_and_reopens_in_chromium(console: tuple[str, Path], tmp_path: Path) -> None:
    url, db = console
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1500, "height": 1200}, accept_downloads=True)
        page.goto(f"{url}/replay")
        page.locator("h1", has_text="Replay what-if").first.wait_for(timeout=60_000)
        page.get_by_role("button", name="Run replay").wait_for(timeout=60_000)
        page.screenshot(path=str(ARTIFACTS / "replay-form.png"), full_page=True)
        page.get_by_role("button", name="Run replay").click()
        page.get_by_text("Replayed ").first.wait_for(timeout=120_000)
        page.get_by_text("Gate passed").or_(page.get_by_text("Gate failed")).first.wait_for(timeout=60_000)
        page.locator('[data-testid="stVegaLiteChart"]').nth(3).wait_for(timeout=60_000)
        page.wait_for_timeout(2500)  # let the charts draw before the screenshot
        assert page.locator('[data-testid="stException"]').count() == 0
        page.get_by_text("Result: 'candidate'").first.scroll_into_view_if_needed()
        page.screenshot(path=str(ARTIFACTS / "replay-result.png"), full_page=True)
        with page.expect_download(timeout=60_000) as download:
            page.get_by_role("button", name="Download candidate YAML").click()
        saved_yaml = tmp_path / "candidate.yaml"
        download.value.save_as(saved_yaml)
        name = page.get_by_label("Name of the run")
        name.fill("from the browser")
        name.press("Enter")
        page.get_by_label("Note").fill("a run a person would make")
        page.get_by_label("Note").press("Enter")
        page.wait_for_timeout(1000)
        page.get_by_role("button", name="Save run").click()
        page.get_by_text("Saved as run").first.wait_for(timeout=60_000)
        page.get_by_role("tab", name="History").click()
        page.get_by_text("from the browser").first.wait_for(timeout=60_000)
        page.wait_for_timeout(1500)
        page.screenshot(path=str(ARTIFACTS / "replay-history.png"), full_page=True)
        assert page.locator('[data-testid="stException"]').count() == 0
    con = connect(db, read_only=True)
    try:
        registry = require_registry(con)
        names = [r[0] for r in con.execute("SELECT name FROM replay_runs").fetchall()]
    finally:
        con.close()
    assert load_candidate(saved_yaml, registry).name == "candidate"
    assert "from the browser" in names
