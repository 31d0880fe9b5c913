"""A change that shows as zero is neutral: grey, no arrow, "no change", on Fleet health and on the Replay page;
a real change keeps its colour and arrow."""

from __future__ import annotations

import datetime as dt
import json
import shutil
from pathlib import Path

import polars as pl
import pytest
from streamlit.proto.Metric_pb2 import Metric as MetricProto
from streamlit.testing.v1 import AppTest

from app.console.deltas import NO_CHANGE, shows_zero
from store import ENV_DB, Held, IngestRun, commit_run, connect
from tests.conftest import REPO

MAIN = str(REPO / "app" / "console" / "main.py")
GRAY, RED = MetricProto.MetricColor.GRAY, MetricProto.MetricColor.RED
NONE, UP = MetricProto.MetricDirection.NONE, MetricProto.MetricDirection.UP
END = int(dt.datetime(2026, 11, 29, 8, tzinfo=dt.UTC).timestamp() * 1000)
DAY = 86_400_000


@pytest.mark.parametrize(("change", "zero"), [
    ("+0.0 pp", True), ("-0.0 pp", True), ("+0", True), ("+0.00 s", True), ("+0.0%", True), ("+0.00 points", True),
    ("+0 °C", True), ("+0.1 pp", False), ("-3", False), ("+10 °C", False), ("+0.01 s", False), ("+1,024", False),
    ("no data", False),
])
def test_a_change_shows_as_zero_at_its_precision(change: str, zero: bool) -> None:
    assert shows_zero(change) is zero


def plant_two_days(db: Path) -> None:
    """Two days of one device each in h100-a (the same every minute) and ascend-a (10 °C hotter on the second)."""
    minutes = range(END - 2 * DAY, END, 60_000)
    rows = []
    for ts in minutes:
        for pool, temp in (("h100-a", 60.0), ("ascend-a", 60.0 if ts < END - DAY else 70.0)):
            node = f"{pool}-01"
            rows += [(ts, pool, node, "0", "accelerator.utilization", 0.5),
                     (ts, pool, node, "0", "accelerator.temperature", temp),
                     (ts, pool, node, "0", "accelerator.power", 400.0)]
    frame = pl.DataFrame(rows, orient="row", schema=["ts", "pool", "node", "device", "metric", "value"],
                         ).with_columns(pl.lit(json.dumps({})).alias("attributes"))
    con = connect(db)
    run = IngestRun("file", "two days")
    run.add_read(frame.height)
    run.add_samples(frame)
    commit_run(Held(con), run)
    con.close()


def test_fleet_health_draws_no_change_grey_and_without_an_arrow(fleet_db: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    plant_two_days(fleet_db)
    monkeypatch.setenv(ENV_DB, str(fleet_db))
    at = AppTest.from_file(MAIN, default_timeout=60).run().switch_page("screens/health.py").run()
    assert not at.exception, at.exception
    tiles = {(m.label, m.value): m for m in at.metric}
    # h100-a comes first: the same readings in both days
    h100 = at.metric[:8]
    for tile in (h100[1], h100[3], h100[4], h100[6]):  # utilization, power, temperature, fatal errors
        assert (tile.proto.delta, tile.proto.color, tile.proto.direction) == (NO_CHANGE, GRAY, NONE), tile.label
    assert h100[0].proto.delta == NO_CHANGE  # devices reporting, 1 then 1
    # ascend-a ran 10 °C hotter: a rise that is bad, red and up
    hotter = tiles["Max temperature", "70 °C"]
    assert (hotter.proto.delta, hotter.proto.color, hotter.proto.direction) == ("+10 °C", RED, UP)


def test_a_candidate_equal_to_its_baseline_changes_nothing_on_the_replay_page(
        demo_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "demo.duckdb"
    shutil.copyfile(demo_db, db)
    monkeypatch.setenv(ENV_DB, str(db))
    at = AppTest.from_file(MAIN, default_timeout=120).run().switch_page("screens/replay.py").run()
    # the form starts from the registry under sla_cost, and so does the default baseline
    assert at.session_state["wi.policy"] == at.session_state["wi.base_policy"] == "sla_cost"
    at.button(key="wi.run").click().run()
    assert not at.exception, at.exception
    tiles = [m for m in at.metric if m.label in ("Busy cost", "Provisioned cost", "Busy cost / M tokens", "p99 TTFT",
                                                 "p99 e2e", "SLA violation rate")]
    assert len(tiles) == 6
    for tile in tiles:
        assert (tile.proto.delta, tile.proto.color, tile.proto.direction) == (NO_CHANGE, GRAY, NONE), tile.label
