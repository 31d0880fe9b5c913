"""One raw series family of a profile as a PromQL term: selected, checked, converted and relabeled.

A term mirrors what normalizers.series and normalizers.normalize do to the samples of one mapping: the
`when` labels pick the entry (the first matching entry wins, so a later entry excludes the earlier ones),
sentinels, NaN, infinities, `reject_values` and min/max drop a sample, `values` remap it, the factor
converts the unit, and the labels become node, device, pool and the attributes under their feed names.
"""

from __future__ import annotations

from dataclasses import dataclass

from canonical.feednames import label_name
from normalizers.profile import MetricMap, Profile, ValueRule
from normalizers.promrules import promql
from normalizers.promrules.placement import Placement
from normalizers.promrules.relabel import INSTANCE_HOST, Setter, Target, const, copy, output_labels, relabel, when


@dataclass(frozen=True)
class Source:
    """What a term reads: metric names, label matchers and the entries it must not take from others."""

    names: tuple[str, ...]
    matchers: tuple[str, ...] = ()
    excluded: tuple[tuple[str, ...], ...] = ()  # matcher sets of earlier entries of the same metric

    def expr(self) -> str:
        """The selector, minus the series an earlier entry claims."""
        base = promql.selector(self.names, self.matchers)
        if not self.excluded:
            return base
        minus = " ".join(f"unless {promql.selector(self.names, (*self.matchers, *m))}" for m in self.excluded)
        return f"({base} {minus})"


def place_targets(profile: Profile, placement: Placement) -> tuple[Target, ...]:
    """node (first non-empty node label, else the scrape target's host), device, then pool."""
    node = (Setter("instance", INSTANCE_HOST, "$1"), *(copy(label) for label in reversed(profile.node_labels)))
    device = tuple(copy(label) for label in reversed(profile.device_labels))
    return (Target("node", node), Target("device", device), *placement.targets())


def attribute_targets(profile: Profile, mapping: MetricMap | None) -> tuple[Target, ...]:
    """Attributes in the order series._attributes writes them: profile labels, mapping labels, fixed, derived."""
    setters: dict[str, list[Setter]] = {}
    for label, attr in profile.labels.items():
        setters.setdefault(attr, []).append(copy(label))
    if mapping is not None:
        for label, attr in mapping.labels.items():
            setters.setdefault(attr, []).append(copy(label))
        for attr, value in mapping.attributes.items():
            setters.setdefault(attr, []).append(const(value))
        for d in mapping.derive:
            chain = setters.setdefault(d.attribute, [])
            if d.default is not None:
                chain.append(const(d.default))
            chain.extend(when(d.label, value, out) for value, out in d.values.items())
    return tuple(Target(label_name(attr), tuple(chain)) for attr, chain in setters.items())


def derive_matchers(mapping: MetricMap) -> tuple[str, ...]:
    """A derive table without a default refuses other label values: select only the known ones."""
    return tuple(promql.matcher(d.label, "=~", promql.alternatives(tuple(d.values)))
                 for d in mapping.derive if d.default is None)


def when_matchers(mapping: MetricMap) -> tuple[str, ...]:
    """The entry's `when` labels as equality matchers."""
    return tuple(promql.matcher(k, "=", v) for k, v in mapping.when.items())


def checked(expr: str, rule: ValueRule, profile: Profile) -> str:
    """The samples a rule accepts, remapped: comparisons drop NaN, infinities and every refused value."""
    parts = [f"({expr})" if " " in expr and not expr.startswith("(") else expr]
    parts.extend(f"!= {promql.number(v)}" for v in rule.reject_values)
    parts.append(f">= {promql.number(rule.min)}" if rule.min is not None else "> -Inf")
    if rule.max is not None:
        parts.append(f"<= {promql.number(rule.max)}")
    sentinel = min((s.at_or_above for s in profile.sentinels), default=None)
    parts.append(f"< {promql.number(sentinel)}" if sentinel is not None else "< +Inf")
    out = " ".join(parts)
    if not rule.values:
        return out
    pieces = [f"({out} == {promql.number(k)})" + ("" if k == v else f" * 0 + {promql.number(v)}")
              for k, v in rule.values.items()]
    return " or ".join(pieces)


def scaled(expr: str, factor: float) -> str:
    """The expression in the canonical unit."""
    return expr if factor == 1.0 else f"({expr}) * {promql.number(factor)}"


def term(expr: str, targets: tuple[Target, ...], placement: Placement) -> str:
    """The relabeled expression, one series per output label set."""
    return promql.max_by(output_labels(targets), relabel(expr, targets, placement.joins()))
