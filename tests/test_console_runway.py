"""The Runway tab of the Replay page and the runway on Fleet health's pool cards, under Streamlit's AppTest on a copy
of the small demo database: the tab's dates are the engine's on the same inputs, a stored runway shows on the card
with its age, and bad input is one line on the page."""

from __future__ import annotations

import datetime as dt
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from app.console.whatif.runway import RESULT_KEY, runway_said
from app.runway_job import compute_runway_job
from replay import Candidate
from replay.runway.stored import RunwayAsk
from store import ENV_DB, Store, connect, require_registry
from store.runways import latest_runways
from tests.conftest import REPO
from tests.test_console_replay import TIERS

MAIN = str(REPO / "app" / "console" / "main.py")


@pytest.fixture
def db(demo_db: Path, tmp_path: Path) -> Path:
    """A private copy of the demo database: storing a runway leaves the shared one as it was."""
    copy = tmp_path / "demo.duckdb"
    shutil.copyfile(demo_db, copy)
    return copy


def open_page(db: Path, monkeypatch: pytest.MonkeyPatch, page: str) -> AppTest:
    monkeypatch.setenv(ENV_DB, str(db))
    at = AppTest.from_file(MAIN, default_timeout=180).run()
    at = at.switch_page(page).run()
    assert not at.exception, at.exception
    return at


def title(spec: dict[str, Any]) -> str | None:
    """A chart's title, or its first layer's."""
    return spec.get("title") or next((t for t in (title(s) for s in spec.get("layer", [])) if t), None)


@pytest.mark.slow  # two runways of the demo's day of traffic, five replays each
def test_the_runway_tab_computes_what_the_engine_does_and_stores_it_for_the_cards(
        db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    at = open_page(db, monkeypatch, "screens/replay.py")
    at.text_input(key="wi.runway_growth").set_value("5%/week").run()
    at.number_input(key="wi.runway_horizon").set_value(4).run()
    at.button(key="wi.runway_run").click().run()
    assert not at.exception, at.exception
    done, candidate = at.session_state[RESULT_KEY]
    # the same inputs through the engine here: the page's form starts as the registry under sla_cost
    con = connect(db, read_only=True)
    reg = require_registry(con)
    con.close()
    ask = RunwayAsk(growth=0.05, horizon_weeks=4)
    form_candidate = Candidate(name="candidate", policy="sla_cost", sla_tiers=TIERS)
    assert candidate == "candidate"
    here = compute_runway_job(Store(db), reg, form_candidate, ask, save=False).runway
    assert [(p.pool, p.breaks_on, p.replicas_to_add) for p in done.runway.pools] == \
        [(p.pool, p.breaks_on, p.replicas_to_add) for p in here.pools]
    titles = [title(json.loads(c.proto.spec)) for c in at.get("vega_lite_chart")]
    assert titles.count("Requests per day: observed, trend and band") == len(here.pools)
    assert titles.count("SLA violations against load") == len(here.pools)
    assert any("pool 'mlu370-a': no stored traffic in the window, left out" in c.value for c in at.caption)
    # stored by a lead (the local user), then Fleet health's cards say it with its age
    at.button(key="wi.runway_save").click().run()
    assert any(s.value.startswith("Stored: Fleet health") for s in at.success)
    stored = latest_runways(connect(db, read_only=True))
    assert sorted(stored["pool"].to_list()) == sorted(p.pool for p in here.pools)
    health = open_page(db, monkeypatch, "screens/health.py")
    captions = [c.value for c in health.caption]
    for row in stored.iter_rows(named=True):
        said = runway_said(row, row["computed_ms"] + 60_000)
        assert said.split(" (computed")[0] in " ".join(captions), said


def test_a_bad_growth_is_one_line_on_the_tab(db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    at = open_page(db, monkeypatch, "screens/replay.py")
    at.text_input(key="wi.runway_growth").set_value("lots").run()
    at.button(key="wi.runway_run").click().run()
    assert [e.value for e in at.error] == ["--growth 'lots': expected auto or a rate such as 5%/week"]
    # the demo's one day of history cannot be fitted: the page asks for a growth, as the CLI does
    at.text_input(key="wi.runway_growth").set_value("auto").run()
    at.button(key="wi.runway_run").click().run()
    assert len(at.error) == 1 and "pass --growth R%/week" in at.error[0].value


@pytest.mark.parametrize(("breaks_on", "status", "computed_ago_ms", "expected"), [
    (dt.date(2026, 12, 21), "breaks", 3 * 3_600_000, "SLA runway ~3 weeks, to 2026-12-21 (computed 3 h ago)"),
    (None, "holds", 2 * 86_400_000, "SLA runway: holds through its 26-week horizon (computed 2 days ago)"),
    (dt.date(2026, 12, 1), "breaks", 5 * 60_000, "SLA runway under a week, to 2026-12-01 (computed 5 min ago)"),
    (None, "too_few", 0, "SLA runway: no date (too few requests reach it under the candidate) (computed 0 min ago)"),
    (None, "no_growth", 0, "SLA runway: no growth detected: holds at today's load (computed 0 min ago)"),
])
def test_the_runway_in_words(breaks_on: dt.date | None, status: str, computed_ago_ms: int, expected: str) -> None:
    row = {"computed_ms": 1_000_000_000_000, "today": dt.date(2026, 11, 30), "breaks_on": breaks_on,
           "horizon_weeks": 26.0, "status": status}
    assert runway_said(row, 1_000_000_000_000 + computed_ago_ms) == expected
