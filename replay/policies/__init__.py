"""Routing policies: one module each, and a registry that names the known ones when asked for another."""

from __future__ import annotations

from replay.exceptions import UnknownNameError
from replay.policies import cost_min, least_loaded, observed, pd_split, round_robin, sla_cost
from replay.policies.base import Policy, Router, State

POLICIES: dict[str, Policy] = {p.name: p for p in (
    round_robin.POLICY, least_loaded.POLICY, cost_min.POLICY, sla_cost.POLICY, pd_split.POLICY, observed.POLICY)}


def get_policy(name: str) -> Policy:
    """The policy registered under name, or an error listing the known ones."""
    try:
        return POLICIES[name]
    except KeyError:
        raise UnknownNameError(f"unknown policy '{name}'; known: {', '.join(POLICIES)}") from None


__all__ = ["POLICIES", "Policy", "Router", "State", "get_policy"]
