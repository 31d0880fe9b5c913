"""Argument types shared by the CLI commands."""

from __future__ import annotations

import argparse

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
