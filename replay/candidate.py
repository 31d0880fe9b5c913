"""Candidate YAML: a routing policy, per-pool what-if overrides, SLA tiers and the overflow rule.

    name: sla-cost
    policy: sla_cost                  # or {name: pd_split, prefill: [h100-a], decode: [ascend-a]}
    overflow: queue                   # queue | reject | degrade
    noise: 0.0                        # relative spread of a mean-1 lognormal factor on service times
    drain_s: 600                      # optional: stop this long after the last arrival
    sla_tiers:
      standard: {ttft_s: 2.0, e2e_s: 60}
    pools:
      h100-a: {replicas: 12, mfu: 0.42, hourly_cost_per_device: 3.0}
      mlu370-a: {enabled: false}

Pool overrides may go beyond the registry's device count: a candidate can model buying capacity.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from yaml.nodes import Node

from pool_registry import Reader, Registry
from pool_registry.yamlread import read_text
from replay.errors import CandidateError, UnknownNameError
from replay.policies import get_policy

OVERFLOW_MODES = ("queue", "reject", "degrade")
INT_OVERRIDES = ("replicas", "max_concurrency", "devices_per_replica", "max_queue")
RATIO_OVERRIDES = ("mfu", "mem_bw_eff")
OVERRIDE_FIELDS = (*INT_OVERRIDES, *RATIO_OVERRIDES, "hourly_cost_per_device", "enabled")


@dataclass(frozen=True)
class PoolOverride:
    """What a candidate changes about one pool; None keeps the registry's value."""

    replicas: int | None = None
    max_concurrency: int | None = None
    devices_per_replica: int | None = None
    max_queue: int | None = None
    mfu: float | None = None
    mem_bw_eff: float | None = None
    hourly_cost_per_device: float | None = None
    enabled: bool = True


@dataclass(frozen=True)
class SlaTier:
    """Latency limits of one SLA tier; None means no limit on that measure."""

    ttft_s: float | None = None
    e2e_s: float | None = None


@dataclass(frozen=True)
class Candidate:
    """One routing and cost configuration to replay."""

    name: str
    policy: str = "sla_cost"
    policy_options: dict[str, tuple[str, ...]] = field(default_factory=dict)
    overflow: str = "queue"
    noise: float = 0.0
    drain_s: float | None = None
    sla_tiers: dict[str, SlaTier] = field(default_factory=dict)
    pools: dict[str, PoolOverride] = field(default_factory=dict)

    def override(self, pool_id: str) -> PoolOverride:
        """The override for a pool, or an empty one."""
        return self.pools.get(pool_id, PoolOverride())


def load_candidate(path: str | Path, registry: Registry) -> Candidate:
    """Read and validate a candidate file against the fleet."""
    text = read_text(path, CandidateError)
    return load_candidate_text(text, registry, str(path), default_name=Path(path).stem)


def load_candidate_text(text: str, registry: Registry, source: str = "<candidate>",
                        default_name: str = "candidate") -> Candidate:
    """Validate candidate YAML text; raise CandidateError listing every problem."""
    r = Reader(source)
    root = r.root(text, "a mapping with at least 'policy'", CandidateError)
    f = r.mapping(root, "", required=("policy",), optional=(
        "name", "overflow", "noise", "drain_s", "sla_tiers", "pools"))
    policy, options = _policy(r, f.get("policy"), registry)
    cand = Candidate(
        name=r.optional(f, "name", "", r.string, default_name),
        policy=policy,
        policy_options=options,
        overflow=r.optional(f, "overflow", "", lambda n, p: r.choice(n, p, OVERFLOW_MODES), "queue"),
        noise=r.optional(f, "noise", "", lambda n, p: r.number(n, p, ge=0, le=2), 0.0),
        drain_s=r.optional(f, "drain_s", "", lambda n, p: r.number(n, p, ge=0), None),
        sla_tiers=r.optional(f, "sla_tiers", "", lambda n, p: _tiers(r, n, p), {}),
        pools=r.optional(f, "pools", "", lambda n, p: _pools(r, n, p, registry), {}),
    )
    if r.problems:
        raise CandidateError(r.problems)
    return cand


def _policy(r: Reader, node: Node | None, registry: Registry) -> tuple[str, dict[str, tuple[str, ...]]]:
    if node is None:
        return "", {}
    if isinstance(node.value, list):
        f = r.mapping(node, "policy", required=("name",), optional=("prefill", "decode"))
        name = r.optional(f, "name", "policy", r.text, "")
        options: dict[str, tuple[str, ...]] = {
            k: r.string_list(f[k], f"policy.{k}") for k in ("prefill", "decode") if k in f}
        known = [p.id for p in registry.pools]
        for key, ids in options.items():
            for i, pool_id in enumerate(ids):
                if pool_id not in known:
                    r.fail(f[key].value[i], f"policy.{key}[{i}]",
                           f"unknown pool '{pool_id}'; known: {', '.join(known)}")
    else:
        name, options = r.text(node, "policy"), {}
        f = {"name": node}
    if name:
        try:
            policy = get_policy(name)
        except UnknownNameError as exc:
            r.fail(f.get("name", node), "policy", str(exc))
        else:
            for problem in policy.check_options(options):
                r.fail(node, "policy", problem)
    return name, options


def _tiers(r: Reader, node: Node, path: str) -> dict[str, SlaTier]:
    out = {}
    for tier, item in r.free_mapping(node, path).items():
        g = r.mapping(item, f"{path}.{tier}", required=(), optional=("ttft_s", "e2e_s"))
        if not g:
            r.fail(item, f"{path}.{tier}", "expected ttft_s and/or e2e_s")
        seconds = lambda n, p: r.number(n, p, gt=0)  # noqa: E731
        out[tier] = SlaTier(ttft_s=r.optional(g, "ttft_s", f"{path}.{tier}", seconds, None),
                            e2e_s=r.optional(g, "e2e_s", f"{path}.{tier}", seconds, None))
    return out


def _pools(r: Reader, node: Node, path: str, registry: Registry) -> dict[str, PoolOverride]:
    known = [p.id for p in registry.pools]
    out = {}
    for pool_id, item in r.free_mapping(node, path).items():
        sub = f"{path}.{pool_id}"
        if pool_id not in known:
            r.fail(item, sub, f"unknown pool '{pool_id}'; known: {', '.join(known)}")
            continue
        if registry.pool(pool_id).serving is None:
            r.fail(item, sub, f"pool '{pool_id}' has no serving config in the registry, so it cannot be replayed")
        g = r.mapping(item, sub, required=(), optional=OVERRIDE_FIELDS)
        values: dict[str, Any] = {}
        for key in INT_OVERRIDES:
            least = 0 if key == "max_queue" else 1
            values[key] = r.optional(g, key, sub, _int_at_least(r, least), None)
        for key in RATIO_OVERRIDES:
            values[key] = r.optional(g, key, sub, lambda n, p: r.number(n, p, gt=0, le=1), None)
        values["hourly_cost_per_device"] = r.optional(
            g, "hourly_cost_per_device", sub, lambda n, p: r.number(n, p, gt=0), None)
        values["enabled"] = r.optional(g, "enabled", sub, r.boolean, True)
        out[pool_id] = PoolOverride(**values)
    return out


def _int_at_least(r: Reader, least: int) -> Callable[[Node, str], int | None]:
    return lambda n, p: r.integer(n, p, ge=least)


def candidate_to_dict(c: Candidate) -> dict[str, Any]:
    """Plain data in the candidate file's own schema (for JSON storage and YAML output)."""
    policy: Any = c.policy if not c.policy_options else {
        "name": c.policy, **{k: list(v) for k, v in c.policy_options.items()}}
    out: dict[str, Any] = {"name": c.name, "policy": policy, "overflow": c.overflow, "noise": c.noise}
    if c.drain_s is not None:
        out["drain_s"] = c.drain_s
    out["sla_tiers"] = {t: {k: v for k, v in dataclasses.asdict(s).items() if v is not None}
                        for t, s in sorted(c.sla_tiers.items())}
    out["pools"] = {p: {k: v for k, v in dataclasses.asdict(o).items() if v is not None and
                        not (k == "enabled" and v is True)} for p, o in sorted(c.pools.items())}
    return out
