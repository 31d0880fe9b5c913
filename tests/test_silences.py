"""Silences as acknowledgements (status/silences.py): matching as Alertmanager matches, reading the API's JSON,
and the silence of a node a lead creates."""

from __future__ import annotations

import pytest

from pool_registry import Registry
from status.evaluate import Status
from status.silences import Matcher, Silence, SilenceError, acknowledgement, node_silence, parse_silences

DEVICE = Status("critical", "device", "h100-a", "h100-a-02", "0", "4 fatal error events", rule="fatal_errors")
NODE = Status("critical", "node", "h100-a", "h100-a-02", "", "device 0: 4 fatal error events", rule="fatal_errors")
POOL = Status("critical", "pool", "h100-a", reason="1 of 2 devices reporting", rule="reporting")
T0 = 1_796_025_600_000  # 2026-11-30T08:00:00Z


def silence(*matchers: Matcher, state: str = "active", ends: str = "2026-11-30T10:00:00.000Z") -> Silence:
    return Silence("id", matchers, "ana@example.com", "RMA opened", "2026-11-30T08:00:00.000Z", ends, state)


@pytest.mark.parametrize(("matcher", "labels", "hit"), [
    (Matcher("node", "h100-a-02"), {"node": "h100-a-02"}, True),
    (Matcher("node", "h100-a-0"), {"node": "h100-a-02"}, False),
    (Matcher("node", "h100-a-.*", regex=True), {"node": "h100-a-02"}, True),
    (Matcher("node", "h100", regex=True), {"node": "h100-a-02"}, False),  # anchored, as Alertmanager's
    (Matcher("node", "h100-a-02", equal=False), {"node": "h100-a-01"}, True),
    (Matcher("device", ""), {"node": "n"}, True),  # a missing label is the empty string
    (Matcher("device", "0", regex=True, equal=False), {"device": "0"}, False),
], ids=["equal", "prefix-is-not-equal", "regex", "regex-anchored", "not-equal", "missing-is-empty", "not-regex"])
def test_matchers_match_as_alertmanager_does(matcher: Matcher, labels: dict[str, str], hit: bool) -> None:
    assert matcher.matches(labels) is hit


def test_a_node_silence_acknowledges_the_node_and_its_devices_not_the_pool(fleet: Registry) -> None:
    body = node_silence("h100-a", "h100-a-02", "ana@example.com", "RMA opened", 2, T0)
    assert body == {"matchers": [{"name": "pool", "value": "h100-a", "isRegex": False, "isEqual": True},
                                 {"name": "node", "value": "h100-a-02", "isRegex": False, "isEqual": True}],
                    "startsAt": "2026-11-30T08:00:00.000Z", "endsAt": "2026-11-30T10:00:00.000Z",
                    "createdBy": "ana@example.com", "comment": "RMA opened"}
    (made,) = parse_silences([{**body, "id": "s1", "status": {"state": "active"}}])
    assert acknowledgement(DEVICE, fleet, [made]) == made and acknowledgement(NODE, fleet, [made]) == made
    assert acknowledgement(POOL, fleet, [made]) is None
    assert made.text() == "acknowledged by ana@example.com until 2026-11-30 10:00 UTC: RMA opened"


def test_only_active_silences_acknowledge_and_the_longest_wins(fleet: Registry) -> None:
    node = Matcher("node", "h100-a-02")
    short, long = silence(node, ends="2026-11-30T09:00:00.000Z"), silence(node, ends="2026-11-30T12:00:00.000Z")
    assert acknowledgement(DEVICE, fleet, [short, long]) == long
    assert acknowledgement(DEVICE, fleet, [silence(node, state="expired"), silence(node, state="pending")]) is None
    assert acknowledgement(DEVICE, fleet, [silence()]) is None  # no matcher silences nothing
    vendor = silence(Matcher("vendor", "nvidia"), Matcher("alertname", "HetpoolDevice.*", regex=True))
    assert acknowledgement(DEVICE, fleet, [vendor]) == vendor and acknowledgement(POOL, fleet, [vendor]) is None


@pytest.mark.parametrize(("payload", "message"), [
    ({"id": "x"}, "expected a list of silences, got dict"),
    ([{"id": "x", "status": {"state": "active"}}], "silence [0] lacks 'matchers'"),
    ([{"matchers": []}], "silence [0] lacks 'id'"),
], ids=["not-a-list", "no-matchers", "no-id"])
def test_what_the_api_does_not_document_is_named(payload: object, message: str) -> None:
    with pytest.raises(SilenceError, match=message.replace("[", r"\[").replace("]", r"\]")):
        parse_silences(payload)


@pytest.mark.parametrize(("who", "comment", "hours", "message"), [
    ("", "why", 1, "needs the user who creates it"),
    ("ana", " ", 1, "needs a comment saying why"),
    ("ana", "why", 0, "at most 720 hours, got 0"),
    ("ana", "why", 721, "at most 720 hours, got 721"),
], ids=["no-user", "no-comment", "zero-hours", "too-long"])
def test_a_silence_needs_who_why_and_a_sane_length(who: str, comment: str, hours: float, message: str) -> None:
    with pytest.raises(SilenceError, match=message):
        node_silence("h100-a", "n", who, comment, hours, T0)
