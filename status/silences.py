"""Alertmanager silences as acknowledgements: which status a silence covers, and the silence of a node.

Pure: the JSON of `GET /api/v2/silences` in, the silence that acknowledges a status out (matched on the labels
its alert carries, as Alertmanager matches them); a node's silence out as the body of `POST /api/v2/silences`.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from canonical.timeunits import HOUR_MS
from pool_registry import Registry
from status.alerts import Labels, iso, labels_of, vendor_of
from status.evaluate import Status


class SilenceError(ValueError):
    """A silence that cannot be read, or cannot be created as asked."""


@dataclass(frozen=True)
class Matcher:
    """One label matcher of a silence."""

    name: str
    value: str
    regex: bool = False
    equal: bool = True

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether the labels satisfy it (a missing label is the empty string, as in Alertmanager)."""
        got = labels.get(self.name, "")
        hit = re.fullmatch(self.value, got) is not None if self.regex else got == self.value
        return hit == self.equal


@dataclass(frozen=True)
class Silence:
    """An acknowledgement: who, until when, why, and what it covers."""

    id: str
    matchers: tuple[Matcher, ...]
    created_by: str
    comment: str
    starts_at: str
    ends_at: str
    state: str  # active, pending or expired

    def covers(self, labels: Labels) -> bool:
        """Whether this silence, while active, silences an alert with these labels."""
        found = dict(labels)
        return self.state == "active" and bool(self.matchers) and all(m.matches(found) for m in self.matchers)

    def text(self) -> str:
        """'acknowledged by ana@example.com until 2026-11-29 10:00 UTC: replacing the PSU'."""
        return f"acknowledged by {self.created_by} until {_short(self.ends_at)} UTC: {self.comment}"


def parse_silences(payload: Any) -> tuple[Silence, ...]:
    """The silences of a `GET /api/v2/silences` answer; SilenceError naming what is not as the API documents."""
    if not isinstance(payload, list):
        raise SilenceError(f"expected a list of silences, got {type(payload).__name__}")
    out = []
    for i, item in enumerate(payload):
        try:
            matchers = tuple(Matcher(str(m["name"]), str(m["value"]), bool(m.get("isRegex", False)),
                                     bool(m.get("isEqual", True))) for m in item["matchers"])
            out.append(Silence(str(item["id"]), matchers, str(item.get("createdBy", "")), str(item.get("comment", "")),
                               str(item.get("startsAt", "")), str(item.get("endsAt", "")),
                               str(item.get("status", {}).get("state", ""))))
        except (KeyError, TypeError, AttributeError) as exc:
            raise SilenceError(f"silence [{i}] lacks {exc}; expected id, matchers and status") from None
    return tuple(out)


def acknowledgement(status: Status, reg: Registry, silences: Iterable[Silence]) -> Silence | None:
    """The active silence that covers the status's alert, the one lasting longest; None when unacknowledged."""
    labels = labels_of(status, vendor_of(reg, status.pool))
    covering = [s for s in silences if s.covers(labels)]
    return max(covering, key=lambda s: s.ends_at, default=None)


def node_silence(pool: str, node: str, created_by: str, comment: str, hours: float, now_ms: int) -> dict[str, Any]:
    """The body of a silence of every alert of one node of a pool, from now for `hours`."""
    if not created_by.strip():
        raise SilenceError("a silence needs the user who creates it")
    if not comment.strip():
        raise SilenceError("a silence needs a comment saying why (what is being done about it)")
    if not 0 < hours <= 24 * 30:
        raise SilenceError(f"a silence lasts more than 0 and at most 720 hours, got {hours:g}")
    matchers = [{"name": "pool", "value": pool, "isRegex": False, "isEqual": True},
                {"name": "node", "value": node, "isRegex": False, "isEqual": True}]
    return {"matchers": matchers, "startsAt": iso(now_ms), "endsAt": iso(now_ms + int(hours * HOUR_MS)),
            "createdBy": created_by, "comment": comment}


def _short(stamp: str) -> str:
    """An API time ('2026-11-29T10:00:00.000Z') as 'YYYY-MM-DD HH:MM'."""
    try:
        moment = dt.datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return stamp
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M")
