"""Time units of the contract: epoch milliseconds everywhere, and durations as people write them (15s, 6h, 14d)."""

from __future__ import annotations

import datetime as _dt
import re

SECOND_MS = 1_000
MINUTE_MS = 60 * SECOND_MS
HOUR_MS = 60 * MINUTE_MS
DAY_MS = 24 * HOUR_MS
WEEK_MS = 7 * DAY_MS
_UNITS_MS = {"ms": 1, "s": SECOND_MS, "m": MINUTE_MS, "h": HOUR_MS, "d": DAY_MS, "w": WEEK_MS}
_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w)")


def parse_duration_ms(text: str) -> int:
    """Milliseconds of a duration such as 15s, 6h, 14d or 1h30m; ValueError saying what is wrong."""
    parts = _PART.findall(text.strip())
    if not parts or "".join(n + u for n, u in parts) != text.strip():
        raise ValueError(f"bad duration {text!r}; expected a number with a unit, like 15s, 6h or 14d")
    total = sum(float(n) * _UNITS_MS[u] for n, u in parts)
    if total <= 0:
        raise ValueError(f"duration {text!r} must be positive")
    return int(total)


def iso_utc(epoch_s: float | None) -> str | None:
    """Seconds since the epoch as ISO 8601 UTC to the millisecond ('2026-11-29T08:00:00.000Z'); None stays None."""
    if epoch_s is None:
        return None
    moment = _dt.datetime.fromtimestamp(epoch_s, _dt.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def epoch_ms(when: _dt.datetime | _dt.date) -> int:
    """Epoch milliseconds of a moment; a naive datetime is UTC, and a date is its midnight UTC."""
    if not isinstance(when, _dt.datetime):
        when = _dt.datetime(when.year, when.month, when.day, tzinfo=_dt.UTC)
    elif when.tzinfo is None:
        when = when.replace(tzinfo=_dt.UTC)
    return round(when.timestamp() * 1000)


def iso_ms(text: str) -> int:
    """Epoch milliseconds of an ISO 8601 time (without a zone it is UTC); ValueError saying what was expected."""
    try:
        return epoch_ms(_dt.datetime.fromisoformat(text.strip()))
    except ValueError:
        raise ValueError(f"{text.strip()!r}: expected an ISO 8601 time such as 2026-11-29T07:00:00Z") from None
