"""Routing policies: one module each, and a registry that names the known ones when asked for another.

A policy written in plain Python anywhere (a module of one's own, a test) joins the registry with `register` and
is then named in candidates like the shipped ones; its router may build on `base.AtArrival` and read the
replicas through `base.State`, compiled or not. The `hetpool` command and the console import the modules named in
HETPOOL_PLUGINS (comma-separated) at start, for such a module to register its policies and predictors.
"""

from __future__ import annotations

from replay import native

native.extend(__path__, __name__)  # the compiled policies, if built, ahead of their sources

# ruff: noqa: E402  (the imports below come after the package's path is set)
from replay.exceptions import UnknownNameError
from replay.policies import cost_min, least_loaded, observed, pd_split, prefix_affinity, round_robin, sla_cost
from replay.policies.base import Policy, Router, State
from replay.registry import add

POLICIES: dict[str, Policy] = {p.name: p for p in (
    round_robin.POLICY, least_loaded.POLICY, cost_min.POLICY, sla_cost.POLICY, pd_split.POLICY, observed.POLICY,
    prefix_affinity.POLICY)}


def get_policy(name: str) -> Policy:
    """The policy registered under name, or an error listing the known ones."""
    try:
        return POLICIES[name]
    except KeyError:
        raise UnknownNameError(f"unknown policy '{name}'; known: {', '.join(POLICIES)}") from None


def register(policy: Policy) -> Policy:
    """Add a policy to the registry under its name and return it; a name taken by another policy is an error."""
    return add(POLICIES, policy, "policy", ("sla_aware", "split", "check_options", "router"),
               "replay/policies/base.py: Policy")


__all__ = ["POLICIES", "Policy", "Router", "State", "get_policy", "register"]
