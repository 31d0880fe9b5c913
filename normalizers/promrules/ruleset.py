"""Profiles in, one Prometheus rules file out: the pool info, the canonical series, the alerts.

The canonical series are the gauges, counters and histogram parts the profiles map, the error counters as
`accelerator_errors_total` and the sticky codes and bitmasks as `accelerator_error_state` (see
normalizers.promrules.errors: a code not in a profile's table is one series code="other"), and the version
labels as `hetpool_software_version_info`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import yaml

from normalizers.profile import Profile
from normalizers.promrules.alerting import alerting_rules
from normalizers.promrules.errors import OTHER, error_terms
from normalizers.promrules.placement import Placement
from normalizers.promrules.recording import Unsupported, recording_rule, recording_terms
from normalizers.promrules.versions import version_terms

CANONICAL_GROUP = "hetpool_canonical"
ALERTS_GROUP = "hetpool_alerts"


@dataclass(frozen=True)
class RuleSet:
    """The rule groups, and every profile entry left out with its reason."""

    groups: list[dict[str, Any]]
    unsupported: list[Unsupported] = field(default_factory=list)
    profiles: tuple[str, ...] = ()

    def count(self, kind: str) -> int:
        """How many rules of a kind ('record' or 'alert') the groups hold."""
        return sum(1 for g in self.groups for r in g["rules"] if kind in r)

    def summary(self) -> dict[str, Any]:
        """Counts per group and the entries left out, for the command's report."""
        return {"profiles": list(self.profiles), "recording_rules": self.count("record"),
                "alerting_rules": self.count("alert"),
                "groups": {g["name"]: len(g["rules"]) for g in self.groups},
                "unsupported": [str(u) for u in self.unsupported]}

    def to_yaml(self) -> str:
        """The rules file, headed by comments naming what was left out."""
        head = [f"# Prometheus rules compiled by `hetpool rules` from the profiles {', '.join(self.profiles)}:",
                "# the canonical series under the names and labels of `hetpool serve-feed`, and alerts for the",
                "# fatal error classes. Compile again after changing a profile or the registry.",
                "# Error counters are accelerator_errors_total (the raw count: increases are events, a drop a",
                "# restart); sticky codes and bitmask bits are accelerator_error_state, one 0/1 series per code",
                "# of a profile's table (an event each time one goes to 1). A code not in the table cannot be a",
                f"# label in PromQL: all such codes are one series code=\"{OTHER}\" with the table's default class,",
                "# so a change from one of them to another is no event here. Versions are",
                "# hetpool_software_version_info{component,version} 1."]
        if self.unsupported:
            head.append("# Not compiled (PromQL cannot express them as the normalizer reads them):")
            head.extend(f"#   {u}" for u in self.unsupported)
        body = yaml.safe_dump({"groups": self.groups}, sort_keys=False, width=1 << 20, allow_unicode=True)
        return "\n".join(head) + "\n" + body


def compile_rules(profiles: Iterable[Profile], placement: Placement) -> RuleSet:
    """The placement's groups, one recording rule per canonical series name over all profiles, then the alerts."""
    terms: dict[str, list[str]] = {}
    alerts: list[dict[str, Any]] = []
    skipped: list[Unsupported] = []
    names = []
    for profile in sorted(profiles, key=lambda p: p.name):
        names.append(profile.name)
        skipped.extend(recording_terms(profile, placement, terms))
        error_terms(profile, placement, terms)
        version_terms(profile, placement, terms)
        found, left = alerting_rules(profile, placement)
        skipped.extend(left)
        alerts.extend(found)
    groups = placement.groups()
    if terms:
        groups.append({"name": CANONICAL_GROUP, "rules": [recording_rule(record, parts, placement)
                                                          for record, parts in sorted(terms.items())]})
    if alerts:
        groups.append({"name": ALERTS_GROUP, "rules": alerts})
    return RuleSet(groups, skipped, tuple(names))
