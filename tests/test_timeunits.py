"""The contract's time units: durations as people write them, and moments as epoch milliseconds in UTC."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given
from hypothesis import strategies as st

from canonical.timeunits import DAY_MS, HOUR_MS, epoch_ms, iso_ms, iso_utc, parse_duration_ms


@pytest.mark.parametrize(("text", "ms"), [("15s", 15_000), ("6h", 6 * HOUR_MS), ("14d", 14 * DAY_MS),
                                          ("1h30m", 90 * 60_000), ("250ms", 250), ("1.5m", 90_000)])
def test_durations(text: str, ms: int) -> None:
    assert parse_duration_ms(text) == ms


@pytest.mark.parametrize(("text", "message"), [("6 hours", "bad duration '6 hours'"), ("", "bad duration ''"),
                                               ("0s", "duration '0s' must be positive"), ("h", "bad duration")])
def test_bad_durations_say_what_was_expected(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_duration_ms(text)


@pytest.mark.parametrize(("when", "ms"), [
    (dt.datetime(2025, 1, 1, tzinfo=dt.UTC), 1_735_689_600_000),
    (dt.datetime(2025, 1, 1), 1_735_689_600_000),                          # naive: UTC
    (dt.date(2025, 1, 1), 1_735_689_600_000),                              # a date: its midnight UTC
    (dt.datetime(2025, 1, 1, 1, tzinfo=dt.timezone(dt.timedelta(hours=1))), 1_735_689_600_000),
    (dt.datetime(1970, 1, 1, 0, 0, 0, 1500, tzinfo=dt.UTC), 2),            # 1.5 ms rounds to 2
])
def test_epoch_ms(when: dt.datetime | dt.date, ms: int) -> None:
    assert epoch_ms(when) == ms


def test_iso_times_read_as_utc_unless_they_say_otherwise() -> None:
    assert iso_ms("2025-01-01T00:00:00Z") == iso_ms("2025-01-01 00:00:00") == 1_735_689_600_000
    assert iso_ms(" 2025-01-01T02:00:00+02:00 ") == 1_735_689_600_000
    with pytest.raises(ValueError, match=r"'soon': expected an ISO 8601 time such as 2026-11-29T07:00:00Z"):
        iso_ms("soon")


@given(st.integers(0, 4_102_444_800_000))
def test_iso_utc_and_iso_ms_round_trip(ms: int) -> None:
    text = iso_utc(ms / 1000)
    assert text is not None and iso_ms(text) == ms
