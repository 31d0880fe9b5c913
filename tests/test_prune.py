"""hetpool prune from the command line on a real database."""

from __future__ import annotations

import json
import time
from pathlib import Path

import polars as pl
import pytest

from app.cli import main
from store import Held, IngestRun, commit_run, connect
from store.rollups import HOUR_MS


def test_prune_command_drops_old_raw_and_keeps_rollups(db_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    now = int(time.time() * 1000)
    old, recent = now - 30 * 24 * HOUR_MS, now - HOUR_MS
    con = connect(db_path)
    run = IngestRun("file", "x")
    run.add_read(2)
    run.add_samples(pl.DataFrame({"ts": [old, recent], "pool": "p", "node": "n", "device": "0",
                                  "metric": "accelerator.power", "value": [100.0, 200.0], "attributes": "{}"}))
    commit_run(Held(con), run)
    con.close()
    assert main(["--db", str(db_path), "--json", "prune", "--keep-raw", "14d"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["deleted"] == 1
    assert now - 14 * 24 * HOUR_MS - HOUR_MS < report["raw_horizon_ms"] <= now - 14 * 24 * HOUR_MS
    con = connect(db_path)
    assert con.execute("SELECT value FROM samples").fetchall() == [(200.0,)]
    assert con.execute("SELECT avg FROM rollup_1h ORDER BY bucket").fetchall() == [(100.0,), (200.0,)]
    con.close()


def test_prune_needs_a_valid_duration(db_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["--db", str(db_path), "prune", "--keep-raw", "two weeks"])
    assert info.value.code == 2
    assert "bad duration 'two weeks'" in capsys.readouterr().err
