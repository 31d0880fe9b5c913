"""Statuses as Alertmanager alerts: labels, annotations and the console link of each, and what one send carries.

Pure: statuses and the registry in, the JSON bodies of Alertmanager's v2 API (`POST /api/v2/alerts`) out. An
alert is named after its scope and the rule of its leading finding (`HetpoolDeviceTemperature`), the same names
the compiled TSDB rules use, and labelled `severity`, `pool`, `node`, `device` and `vendor` (empty ones left out,
as Alertmanager drops them). Alertmanager resolves an alert by itself at its `endsAt`, so a firing alert is sent
again before then, and one whose status cleared is sent once more with `endsAt` now.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from canonical.timeunits import iso_utc
from pool_registry import Registry
from status.evaluate import Status

LABELS = ("alertname", "severity", "pool", "node", "device", "vendor")
Labels = tuple[tuple[str, str], ...]  # sorted (name, value) pairs: an alert's identity, as Alertmanager sees it


def camel(word: str) -> str:
    """'stopped_reporting' -> 'StoppedReporting'."""
    return "".join(part.capitalize() for part in word.split("_"))


def alert_name(scope: str, rule: str) -> str:
    """The alert of a scope and rule: ('device', 'temperature') -> 'HetpoolDeviceTemperature'."""
    return f"Hetpool{camel(scope)}{camel(rule or 'status')}"


def page_url(base: str, pool: str, node: str = "", device: str = "") -> str:
    """The console page of a place: the Device or Node page, else Fleet health on the pool (base empty: a relative
    link)."""
    root = base.rstrip("/")
    if node and device:
        return f"{root}/device?{urllib.parse.urlencode({'node': node, 'pool': pool, 'device': device})}"
    if node:
        return f"{root}/node?{urllib.parse.urlencode({'node': node, 'pool': pool})}"
    return f"{root}/health?{urllib.parse.urlencode({'pool': pool})}" if pool else f"{root}/health"


@dataclass(frozen=True)
class Alert:
    """One status as Alertmanager will see it."""

    labels: Labels
    summary: str
    description: str
    url: str

    @property
    def name(self) -> str:
        """Its alertname."""
        return dict(self.labels)["alertname"]

    def body(self, starts_ms: int, ends_ms: int) -> dict[str, object]:
        """The JSON object of this alert in a POST to /api/v2/alerts."""
        return {"labels": dict(self.labels), "startsAt": iso(starts_ms), "endsAt": iso(ends_ms),
                "generatorURL": self.url,
                "annotations": {"summary": self.summary, "description": self.description, "console": self.url}}


def labels_of(status: Status, vendor: str) -> Labels:
    """The labels of a status's alert: a collector's name goes under `collector` (it has no node)."""
    scope_labels = {"collector": status.node} if status.scope == "collector" else {
        "pool": status.pool, "node": status.node, "device": status.device}
    found = {"alertname": alert_name(status.scope, status.rule), "severity": status.level, **scope_labels,
             "vendor": vendor}
    return tuple(sorted((k, v) for k, v in found.items() if v))


def vendor_of(reg: Registry, pool: str) -> str:
    """The vendor of a pool's chip ('' for a pool the registry does not know, or a collector)."""
    match = next((p for p in reg.pools if p.id == pool), None)
    return reg.chip_of(match).vendor if match is not None else ""


def alert_of(status: Status, reg: Registry, console_url: str = "") -> Alert:
    """The alert of one status that is not ok; its annotations carry the console's reason and link."""
    url = f"{console_url.rstrip('/')}/collectors" if status.scope == "collector" else \
        page_url(console_url, status.pool, status.node, status.device)
    first = status.reason.split("; ")[0]
    return Alert(labels_of(status, vendor_of(reg, status.pool)),
                 f"{status.level} {status.scope} {status.where}: {first}", status.reason, url)


def alerts_of(statuses: Iterable[Status], reg: Registry, console_url: str = "") -> tuple[Alert, ...]:
    """The alerts of every warning or critical status."""
    return tuple(alert_of(s, reg, console_url) for s in statuses if s.level in ("warning", "critical"))


@dataclass(frozen=True)
class Batch:
    """One send: the bodies to POST, and the alerts firing after it (labels -> when each started, in ms)."""

    bodies: tuple[dict[str, object], ...]
    firing: Mapping[Labels, int]
    resolved: int  # how many of the bodies resolve an alert


def batch(current: Iterable[Alert], firing: Mapping[Labels, int], now_ms: int, hold_ms: int) -> Batch:
    """What to send now: every current alert held until now + hold_ms (keeping the start it had), and every alert
    that fired before and is no longer current resolved at now."""
    bodies: list[dict[str, object]] = []
    after: dict[Labels, int] = {}
    for alert in current:
        if alert.labels in after:
            continue
        starts = firing.get(alert.labels, now_ms)
        after[alert.labels] = starts
        bodies.append(alert.body(starts, now_ms + hold_ms))
    gone = [(labels, starts) for labels, starts in firing.items() if labels not in after]
    for labels, starts in gone:
        bodies.append({"labels": dict(labels), "startsAt": iso(starts), "endsAt": iso(now_ms)})
    return Batch(tuple(bodies), after, len(gone))


def iso(ms: int) -> str:
    """Milliseconds since the epoch as ISO 8601 UTC: '2026-11-29T08:00:00.000Z'."""
    return str(iso_utc(ms / 1000))
