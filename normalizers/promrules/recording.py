"""Recording rules of one profile: every mapped metric under its feed name, with the feed's labels.

Gauges and counters are recorded under `canonical.feednames.sample_name`; a histogram whose source is already
in the canonical unit is recorded as its _bucket, _sum and _count parts under the family name. Several
sources of one canonical series are one rule, joined with `or` in profile order, so the first source present
wins as in the store; the rule of a name holds the terms of every profile, since promtool's duplicate-rules
check flags one name recorded by two rules. What PromQL cannot express is returned as unsupported, with the reason.
"""

from __future__ import annotations

from dataclasses import dataclass

from canonical.feednames import COMPONENT_SCOPE, SCOPE_LABEL, family_name, sample_name
from canonical.metrics import METRICS
from canonical.prometheus import COUNTER_SUFFIX, HISTOGRAM_PARTS
from normalizers.profile import DEVICE, Derived, MetricMap, Profile, ValueRule
from normalizers.promrules import promql
from normalizers.promrules.placement import Placement
from normalizers.promrules.relabel import Target, const, copy
from normalizers.promrules.terms import (
    Source,
    attribute_targets,
    checked,
    derive_matchers,
    place_targets,
    scaled,
    term,
    when_matchers,
)


@dataclass(frozen=True)
class Unsupported:
    """A profile entry the rules leave out, and why."""

    profile: str
    source: str
    reason: str

    def __str__(self) -> str:
        return f"{self.profile}: {self.source}: {self.reason}"


def recording_terms(profile: Profile, placement: Placement,
                    terms: dict[str, list[str]]) -> list[Unsupported]:
    """Add the profile's terms to `terms` (record name -> terms, in order); return the entries left out."""
    skipped: list[Unsupported] = []
    for source, maps in profile.metrics.items():
        for i, m in enumerate(maps):
            excluded = tuple(when_matchers(earlier) for earlier in maps[:i] if earlier.when)
            why = _direct(profile, placement, m, excluded, terms)
            if why:
                skipped.append(Unsupported(profile.name, source, why))
    for d in profile.derived:
        terms.setdefault(sample_name(d.metric), []).append(_derived(profile, placement, d))
    return skipped


def recording_rule(record: str, terms: list[str], placement: Placement) -> dict[str, str]:
    """One rule per canonical series name: the terms of every profile, the first present winning."""
    return {"record": record, "expr": placement.finish(" or ".join(f"({t})" for t in terms))}


def _direct(profile: Profile, placement: Placement, m: MetricMap, excluded: tuple[tuple[str, ...], ...],
            terms: dict[str, list[str]]) -> str | None:
    canon = METRICS[m.metric]
    matchers = (*when_matchers(m), *derive_matchers(m), *placement.matchers())
    targets = (*place_targets(profile, placement), *_scope(m.scope), *attribute_targets(profile, m))
    if canon.kind == "histogram":
        if m.stat is not None:
            return (f"a counter standing for the {m.stat} of {m.metric} alone; a histogram needs its buckets, "
                    f"so it is not recorded")
        if m.factor != 1.0:
            return (f"histogram in {m.unit}: its bucket bounds (le) would need converting to {canon.unit}, which "
                    f"PromQL cannot do to a label")
        for suffix in HISTOGRAM_PARTS:
            # the bound is kept as written: in the canonical unit already, so it needs no conversion
            parts = (*targets, Target("le", (copy("le"),))) if suffix == "_bucket" else targets
            expr = checked(Source((m.source + suffix,), matchers, excluded).expr(), m.rule, profile)
            terms.setdefault(family_name(m.metric) + suffix, []).append(term(expr, parts, placement))
        return None
    names = (m.source,) if canon.kind != "counter" or m.source.endswith(COUNTER_SUFFIX) else (
        m.source, m.source + COUNTER_SUFFIX)
    expr = scaled(checked(Source(names, matchers, excluded).expr(), m.rule, profile), m.factor)
    terms.setdefault(sample_name(m.metric), []).append(term(expr, targets, placement))
    return None


def _derived(profile: Profile, placement: Placement, d: Derived) -> str:
    """The sum of the inputs at one instant, each relabeled like a row of the device, then converted."""
    targets = (*place_targets(profile, placement), *_scope(d.scope), *attribute_targets(profile, None))
    parts = []
    for name in d.inputs:
        maps = profile.metrics.get(name, ())
        rule = maps[0].rule if len(maps) == 1 else ValueRule()  # a mapped input is checked as its own row is
        expr = checked(promql.selector((name,), placement.matchers()), rule, profile)
        parts.append(term(expr, targets, placement))
    return scaled(" + ".join(parts), d.factor)


def _scope(scope: str) -> tuple[Target, ...]:
    """scope="component" on a series of one part of its device, as the feed labels it; nothing otherwise."""
    return () if scope == DEVICE else (Target(SCOPE_LABEL, (const(COMPONENT_SCOPE),)),)
