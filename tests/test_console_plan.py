"""The Replay page's Plan tab under Streamlit's AppTest: the planner's numbers, its chart and a memory breakdown."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from app.console.whatif.plan import RESULT
from replay.planner import PlanReport, PlanSettings, Targets, plan_model, plans_frame
from store import ENV_DB, connect, require_registry
from tests.conftest import REPO

MAIN = str(REPO / "app" / "console" / "main.py")


def open_page(db: Path, monkeypatch: pytest.MonkeyPatch) -> AppTest:
    monkeypatch.setenv(ENV_DB, str(db))
    at = AppTest.from_file(MAIN, default_timeout=120).run().switch_page("screens/replay.py").run()
    assert not at.exception, at.exception
    return at


def test_the_plan_tab_shows_the_planners_layouts_and_the_chosen_ones_memory(
        demo_db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    at = open_page(demo_db, monkeypatch)
    at.selectbox(key="wi.plan_model").set_value("llama-3.1-70b").run()
    at.multiselect(key="wi.plan_pools").set_value(["h100-a", "gaudi3-a"]).run()
    at.text_input(key="wi.plan_concurrency").set_value("16, 64").run()
    at.number_input(key="wi.plan_tpot").set_value(40.0).run()
    at.button(key="wi.plan_run").click().run()
    assert not at.exception, at.exception
    shown: PlanReport = at.session_state[RESULT]
    con = connect(demo_db, read_only=True)
    try:
        registry = require_registry(con)
    finally:
        con.close()
    expected = plan_model(registry, "llama-3.1-70b", ("h100-a", "gaudi3-a"),
                          PlanSettings(concurrency=(16, 64), targets=Targets(tpot_ms=40.0)))
    assert shown == expected
    table = next(d.value for d in at.dataframe if "layout" in d.value.columns)
    frame = plans_frame(expected)
    assert list(table["layout"]) == frame["layout"].to_list()
    assert list(table["tpot_ms_p50"]) == frame["tpot_ms_p50"].to_list()
    titles = [json.loads(c.proto.spec).get("title") for c in at.get("vega_lite_chart")]
    assert "TPOT against output tokens/s per device (each fitting layout and concurrency)" in titles
    best = expected.plans[0]
    chosen = at.selectbox(key="wi.plan_chosen")
    assert chosen.value == f"{best.layout.pool} {best.layout.label} at concurrency {best.concurrency}"
    breakdown = next(d.value for d in at.dataframe if list(d.value.columns) == ["part", "gb"])
    assert list(breakdown["gb"])[:3] == [best.memory.weights_gb, best.memory.kv_gb, best.memory.working_gb]


def test_the_memory_wall_and_impossible_targets_are_warned(demo_db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    at = open_page(demo_db, monkeypatch)  # the demo's pools have two devices each
    at.selectbox(key="wi.plan_model").set_value("qwen3-235b-a22b").run()
    at.multiselect(key="wi.plan_pools").set_value(["mlu370-a", "gaudi3-a"]).run()
    at.text_input(key="wi.plan_concurrency").set_value("16").run()
    at.button(key="wi.plan_run").click().run()
    assert not at.exception, at.exception
    # (470 GB + 1,152 x 16 x 192,512 B of KV) / (128 x 0.9 - 1 GB) and / (48 x 0.9 - 1 GB) per device
    assert [w.value for w in at.warning] == [
        "Memory wall on gaudi3-a: nothing fits; qwen3-235b-a22b needs at least 5 devices; the pool has 2.",
        "Memory wall on mlu370-a: nothing fits; qwen3-235b-a22b needs at least 12 devices; the pool has 2."]
    assert "No layout of qwen3-235b-a22b fits any pool planned." in [i.value for i in at.info]
    at.selectbox(key="wi.plan_model").set_value("llama-3.1-70b").run()
    at.number_input(key="wi.plan_tpot").set_value(0.1).run()
    at.button(key="wi.plan_run").click().run()
    warnings = [w.value for w in at.warning]
    assert any(re.match(r"Targets missed: TPOT p50 <= 0.1 ms fails: the fastest layout \(gaudi3-a tp\d pp\d at "
                        r"concurrency 16\) reaches", w) for w in warnings), warnings
    at.text_input(key="wi.plan_concurrency").set_value("x").run()
    assert [e.value for e in at.error] == ["Concurrency levels: expected whole numbers separated by commas, got 'x'"]
