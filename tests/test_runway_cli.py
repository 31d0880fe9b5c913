"""hetpool replay runway end to end on a real DuckDB file: the JSON it promises, its exit codes, its refusals."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import polars as pl
import pytest

from canonical.timeunits import DAY_MS
from store import connect, save_registry
from store.runways import latest_runways
from tests.cli import run
from tests.test_runway_breaking import END_MS, MM4, WEEKS_TO_BREAK, history

CANDIDATE = """name: knowing
policy: cost_min
predictor: oracle
sla_tiers:
  standard: {ttft_s: 30}
"""
KEYS = ["pool", "growth_per_week", "growth_low", "growth_high", "breaks_on", "breaks_on_low", "breaks_on_high",
        "violation_rate_now", "replicas_to_add", "added_cost_per_month_usd", "notes"]


@pytest.fixture
def mm4_db(db_path: Path) -> Path:
    """A database whose registry is the one M/M/4 pool 'p'."""
    c = connect(db_path)
    save_registry(c, MM4, "mm4.yaml")
    c.close()
    return db_path


def ingest(capsys: pytest.CaptureFixture[str], db: Path, frame: pl.DataFrame, path: Path) -> None:
    frame.rename({"origin": "obs_pool"}).drop("seq").write_csv(path)
    assert run(capsys, "--db", str(db), "ingest", "traffic", str(path))[0] == 0


def test_a_growing_pool_breaks_within_the_horizon_exits_1_and_is_stored(
        capsys: pytest.CaptureFixture[str], mm4_db: Path, tmp_path: Path) -> None:
    ingest(capsys, mm4_db, history(11), tmp_path / "history.csv")
    cand = tmp_path / "knowing.yaml"
    cand.write_text(CANDIDATE)
    gate = tmp_path / "gate.yaml"
    gate.write_text("max_sla_violation_rate: 0.01\n")
    code, out, err = run(capsys, "--db", str(mm4_db), "replay", "runway", "--candidate", str(cand), "--gate",
                         str(gate), "--horizon", "12w", "--seed", "3", "--json")
    assert code == 1, err
    (pool,) = json.loads(out)["pools"]
    assert sorted(pool) == sorted(KEYS) and pool["pool"] == "p"
    today = dt.datetime.fromtimestamp((END_MS - 1) / 1000, dt.UTC).date()
    erlang = today + dt.timedelta(days=7 * WEEKS_TO_BREAK)
    breaks = dt.date.fromisoformat(pool["breaks_on"])
    assert abs((breaks - erlang).days) <= 7
    assert pool["breaks_on_low"] <= erlang.isoformat() <= pool["breaks_on_high"]
    assert pool["growth_low"] < 0.10 < pool["growth_high"]
    # whole days back from the last request: the first, which the history starts inside of, is left out
    assert any("log-linear fit of daily requests" in n and "27 days (3.9 weeks)" in n for n in pool["notes"])
    stored = latest_runways(connect(mm4_db, read_only=True))
    assert stored["pool"].to_list() == ["p"] and stored["breaks_on"][0] == breaks
    # the text says the same, and a horizon that ends before the date holds: exit 0
    code, out, _ = run(capsys, "--db", str(mm4_db), "replay", "runway", "--candidate", str(cand), "--horizon", "2w",
                       "--no-save")
    assert code == 0 and "every pool holds its SLA through the horizon" in out
    assert "holds through the horizon" in out


@pytest.mark.parametrize(("days", "hole", "argv", "message"), [
    (None, None, (), "no stored requests: ingest traffic first"),
    (10, None, (), "pool 'p': 9 whole days of stored traffic before"),
    (21, 5, (), "pool 'p': no requests stored on the day from"),
    (21, None, ("--pool", "q"), "unknown pool 'q'; replayable: p"),
    (21, None, ("--growth", "lots"), "--growth 'lots': expected auto or a rate such as 5%/week"),
    (21, None, ("--window", "20d12h"), "--window 20.5 days: expected whole days"),
    (21, None, ("--horizon", "200w"), "--horizon 200 weeks: expected more than 0 and at most 104 weeks"),
    (15, None, ("--horizon", "104w"), "supports a horizon of"),
])
def test_bad_input_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str], mm4_db: Path, tmp_path: Path,
                                          days: int | None, hole: int | None, argv: tuple[str, ...],
                                          message: str) -> None:
    if days is not None:
        frame = history(4, days=days)
        if hole is not None:
            frame = frame.filter((pl.col("arrival_ms") < END_MS - hole * DAY_MS)
                                 | (pl.col("arrival_ms") >= END_MS - (hole - 1) * DAY_MS))
        ingest(capsys, mm4_db, frame, tmp_path / "t.csv")
    cand = tmp_path / "knowing.yaml"
    cand.write_text(CANDIDATE)
    code, out, err = run(capsys, "--db", str(mm4_db), "replay", "runway", "--candidate", str(cand), *argv)
    assert code == 2 and out == ""
    assert message in err and len(err.strip().splitlines()) == 1, err
