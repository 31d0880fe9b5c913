"""Where a series' pool and vendor come from in PromQL: the registry's assign rules, or a label already there.

In hetpool the pool of a sample is the one registry pool whose `assign` rule matches its node (or labels),
and the feed's vendor is that pool's chip vendor. Prometheus knows neither, so the rules carry them:

- `RegistryPlacement` writes each pool's assign rule as a label_replace on the computed node (node patterns
  become anchored regexes) or on the joined assign labels, and joins every series on `hetpool_pool_info`, a
  recorded series per pool with its vendor. The join adds `vendor` and drops what no pool claims, as the
  store rejects it.
- `LabelPlacement` takes the pool from a label the series already carry (a target label set by relabeling);
  series without it are left out, and the vendor comes from the registry when there is one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from normalizers.exceptions import NormalizerError
from normalizers.promrules import promql
from normalizers.promrules.relabel import Join, Setter, Target, copy, when
from pool_registry import Registry

POOL_INFO = "hetpool_pool_info"
REGISTRY_GROUP = "hetpool_registry"
ASSIGN = "hetpool_assign_"  # prefix of the joined assign labels of one pool
SEP = "\u001f"               # unit separator: never part of a label value one would assign on


class RulesError(NormalizerError):
    """Profiles or options that cannot be compiled into Prometheus rules."""


class Placement(Protocol):
    """How the rules give every canonical series its pool and vendor."""

    def matchers(self) -> tuple[str, ...]:
        """Label matchers every raw selector needs."""
        ...

    def targets(self) -> tuple[Target, ...]:
        """Targets computing `pool`, applied after `node` is computed."""
        ...

    def joins(self) -> tuple[Join, ...]:
        """Temporary joined labels the pool targets read."""
        ...

    def finish(self, expr: str) -> str:
        """The whole expression of one rule with `vendor` added (and unplaced series dropped)."""
        ...

    def groups(self) -> list[dict[str, Any]]:
        """Rule groups the finished expressions depend on."""
        ...


def _vendors(registry: Registry) -> dict[str, str]:
    return {p.id: registry.chip_of(p).vendor for p in registry.pools}


@dataclass(frozen=True)
class RegistryPlacement:
    """Pools from the registry's assign rules, vendors by a join on the recorded pool info."""

    registry: Registry

    def matchers(self) -> tuple[str, ...]:
        """No selector narrowing: the join drops what no pool claims."""
        return ()

    def joins(self) -> tuple[Join, ...]:
        """One joined label per pool whose assign rule names several labels."""
        return tuple(Join(f"{ASSIGN}{i}", SEP, tuple(p.assign.labels)) for i, p in enumerate(self.registry.pools)
                     if len(p.assign.labels) > 1)

    def targets(self) -> tuple[Target, ...]:
        """One setter per pool and rule kind, in registry order (a later match wins)."""
        setters: list[Setter] = []
        for i, p in enumerate(self.registry.pools):
            if p.assign.node_patterns:
                regex = "|".join(promql.glob(g) for g in p.assign.node_patterns)
                setters.append(Setter("node", regex, promql.replacement(p.id), computed=True))
            labels = p.assign.labels
            if len(labels) == 1:
                (label, value), = labels.items()
                setters.append(when(label, value, p.id))
            elif labels:
                regex = promql.literal(SEP.join(labels.values()))
                setters.append(Setter(f"{ASSIGN}{i}", regex, promql.replacement(p.id)))
        return (Target("pool", tuple(setters)),)

    def finish(self, expr: str) -> str:
        """Multiply by the pool's info series (value 1), taking its vendor label."""
        return f"({expr}) * on(pool) group_left(vendor) {POOL_INFO}"

    def groups(self) -> list[dict[str, Any]]:
        """The pool info: one constant series per registry pool, with its chip vendor."""
        parts = []
        for pool, vendor in _vendors(self.registry).items():
            one = promql.label_replace("vector(1)", "pool", promql.replacement(pool), "", "")
            parts.append(promql.label_replace(one, "vendor", promql.replacement(vendor), "", "") if vendor else one)
        if not parts:
            raise RulesError("the registry has no pools, so no series could be placed; load a fleet with pools")
        return [{"name": REGISTRY_GROUP, "rules": [{"record": POOL_INFO, "expr": " or ".join(parts)}]}]


@dataclass(frozen=True)
class LabelPlacement:
    """The pool is a label of the raw series; the vendor comes from the registry's pools when given."""

    label: str
    registry: Registry | None = None

    def __post_init__(self) -> None:
        if not promql.valid_label(self.label) or self.label.startswith("__"):
            raise RulesError(f"--pool-label {self.label!r} is not a label name; expected letters, digits and '_', "
                             f"not starting with a digit or '__'")

    def matchers(self) -> tuple[str, ...]:
        """Series without the pool label are left out, as the store refuses samples without a pool."""
        return (promql.matcher(self.label, "!=", ""),)

    def joins(self) -> tuple[Join, ...]:
        """None needed."""
        return ()

    def targets(self) -> tuple[Target, ...]:
        """A copy of the pool label."""
        return (Target("pool", (copy(self.label),)),)

    def finish(self, expr: str) -> str:
        """The vendor of each known pool; a pool the registry does not know gets none, as in the feed."""
        by_vendor: dict[str, list[str]] = {}
        for pool, vendor in (_vendors(self.registry) if self.registry else {}).items():
            if vendor:
                by_vendor.setdefault(vendor, []).append(pool)
        for vendor, pools in sorted(by_vendor.items()):
            expr = promql.label_replace(expr, "vendor", promql.replacement(vendor), "pool", promql.alternatives(pools))
        return expr

    def groups(self) -> list[dict[str, Any]]:
        """Nothing to record."""
        return []
