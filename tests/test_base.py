"""Argument types shared by the CLI commands, and how a command tells that it waits for the database."""

from __future__ import annotations

import argparse
import threading
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.commands._base import duration_ms, timestamp_ms


@pytest.mark.parametrize(("text", "ms"), [
    ("15s", 15_000), ("6h", 21_600_000), ("14d", 1_209_600_000), ("1h30m", 5_400_000), ("250ms", 250),
    ("1.5m", 90_000), ("2w", 1_209_600_000),
])
def test_durations(text: str, ms: int) -> None:
    assert duration_ms(text) == ms


@pytest.mark.parametrize("text", ["", "15", "15x", "s", "-5s", "0s", "1h 30m", "h1"])
def test_bad_durations_say_what_is_expected(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="duration"):
        duration_ms(text)


@given(st.integers(0, 99), st.integers(0, 23), st.integers(1, 59))
def test_duration_round_trip(d: int, h: int, s: int) -> None:
    assert duration_ms(f"{d}d{h}h{s}s") == ((d * 24 + h) * 3600 + s) * 1000


@pytest.mark.parametrize(("text", "ms"), [
    ("2026-01-01T00:00:00Z", 1_767_225_600_000),
    ("2026-01-01T00:00:00", 1_767_225_600_000),          # no zone means UTC
    ("2026-01-01T01:00:00+01:00", 1_767_225_600_000),
    ("2026-01-01 00:00:00.250", 1_767_225_600_250),
])
def test_timestamps(text: str, ms: int) -> None:
    assert timestamp_ms(text) == ms


def test_bad_timestamp() -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="bad time 'yesterday'; expected ISO-8601"):
        timestamp_ms("yesterday")


def test_a_command_behind_a_writer_says_so_in_one_line_then_goes_on(fleet_db: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    from app.cli import main
    from tests.holders import holding

    with holding(fleet_db, "exclusive", "hetpool ingest file big.prom") as proc:
        threading.Timer(1.8, lambda: proc.stdin.close() if proc.stdin else None).start()
        assert main(["--db", str(fleet_db), "registry", "show"]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"hetpool: waiting for the database '{fleet_db}': hetpool ingest "
                                               f"file big.prom (pid {proc.pid}) has been writing for")


def test_a_wait_that_runs_out_is_one_line_and_exit_2(fleet_db: Path, capsys: pytest.CaptureFixture[str],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from app.cli import main
    from tests.holders import holding

    monkeypatch.setenv("HETPOOL_LOCK_TIMEOUT", "1.5")
    with holding(fleet_db, "exclusive", "hetpool prune"):
        assert main(["--db", str(fleet_db), "registry", "load", "examples/fleet.yaml"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith(f"hetpool: error: database '{fleet_db}' stayed busy for 2 s while hetpool registry "
                              "load examples/fleet.yaml waited: hetpool prune (pid")
    assert err[-1].endswith("try again, or set HETPOOL_LOCK_TIMEOUT to wait longer") and len(err) == 2
