"""Candidate YAML: the one loader for candidate files, validated against the fleet and the policy registry.

    name: sla-cost
    policy: sla_cost                  # or {name: pd_split, prefill: [h100-a], decode: [ascend-a]}, with an optional
                                      # encode: [pool ids] for images encoded apart
                                      # or {name: sla_cost, max_failure_risk: 0.001}
    overflow: queue                   # queue | reject | degrade
    noise: 0.0                        # spread of each replica's speed (a mean-1 lognormal factor on its steps)
    drain_s: 600                      # optional: stop this long after the last arrival
    predictor: online                 # what routers expect a request to generate (the default; see below)
    sla_tiers:
      standard: {ttft_s: 2.0, e2e_s: 60}
    pools:
      h100-a: {replicas_scale: 0.5, mfu: 0.42, step_overhead_ms: 4}
      mlu370-a: {enabled: false}

Pool overrides may go beyond the registry's device count: a candidate can model buying capacity. The data
classes live in replay.candidate.

`faults` says where replica failures and clock throttling come from (replay.faults): `telemetry` (the
default: the store's record over the 7 days before the replayed traffic), `off`, or a mapping
`{window_days: 7, repair_s: 900, pools: {h100-a: {failures_per_device_hour: 0.002, repair_s: 600,
throttled_share: 0.5, throttled_clock: 0.5}}}` whose pools replace the telemetry's figures.

`step_time_spread: {h100-a: 1.08}` is the calibration's error on a pool's step time as a factor, which `hetpool
replay calibrate` writes and the capacity runway turns into a wider band; the replay does not use it.

`predictor` names an output-length predictor (replay.predictors), with its options in a mapping:
`online` or `{name: online, quantile: 0.9, min_samples: 20, default: 256}`, `{name: fixed, tokens: 300}`,
`{name: table, tiers: {premium: 120, batch: 800}, default: 256}`, or `oracle` (the true lengths: an upper
bound, not achievable by a router).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

from yaml.nodes import MappingNode, Node

from pool_registry import KV_CACHE_DTYPES, SCHEDULES, Reader, Registry
from pool_registry.yamlread import read_text
from replay.candidate import (
    FAULT_MODES,
    INT_OVERRIDES,
    NONNEGATIVE_OVERRIDES,
    OVERFLOW_MODES,
    OVERRIDE_FIELDS,
    POSITIVE_OVERRIDES,
    RATIO_OVERRIDES,
    SHARE_OVERRIDES,
    Candidate,
    FaultSpec,
    PoolFaults,
    PoolOverride,
    PredictorSpec,
    SlaTier,
)
from replay.exceptions import CandidateError, UnknownNameError
from replay.fitting import NAMES as FITTED_NAMES
from replay.policies import get_policy
from replay.policies.pd_split import STAGES
from replay.predictors import get_predictor

POOL_LISTS = STAGES  # policy options that list pool ids (pd_split's stages)

__all__ = ["Candidate", "PoolOverride", "PredictorSpec", "SlaTier", "candidate_to_dict", "load_candidate",
           "load_candidate_text", "override_value", "predictor_to_data"]


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
        "name", "overflow", "noise", "drain_s", "sla_tiers", "pools", "predictor", "faults", "step_time_spread"))
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
        predictor=r.optional(f, "predictor", "", lambda n, p: _predictor(r, n, p), PredictorSpec()),
        faults=r.optional(f, "faults", "", lambda n, p: _faults(r, n, p, registry), FaultSpec()),
        step_time_spread=r.optional(f, "step_time_spread", "", lambda n, p: _spreads(r, n, p, registry), {}),
    )
    table = cand.predictor.options.get("tiers") if cand.predictor.name == "table" else None
    if isinstance(table, dict) and cand.sla_tiers:
        for tier in table:
            if tier not in cand.sla_tiers:
                r.fail(f["predictor"], f"predictor.tiers.{tier}", f"unknown SLA tier '{tier}'; the candidate's: "
                                                                  f"{', '.join(sorted(cand.sla_tiers))}")
    if r.problems:
        raise CandidateError(r.problems)
    return cand


def _policy(r: Reader, node: Node | None, registry: Registry) -> tuple[str, dict[str, tuple[str, ...]]]:
    """`name` or `{name: ..., option: value or [values]}`; the policy checks its own options."""
    if node is None:
        return "", {}
    if isinstance(node.value, list):
        f = r.free_mapping(node, "policy")
        if "name" not in f:
            r.fail(node, "policy.name", "missing required field")
        name = r.text(f["name"], "policy.name") if "name" in f else ""
        options: dict[str, tuple[str, ...]] = {
            k: r.string_list(v, f"policy.{k}") if isinstance(v.value, list) else (r.text(v, f"policy.{k}"),)
            for k, v in f.items() if k != "name"}
        known = [p.id for p in registry.pools]
        for key, ids in options.items():
            if key not in POOL_LISTS:
                continue
            for i, pool_id in enumerate(ids):
                if pool_id not in known:
                    at = f[key].value[i] if isinstance(f[key].value, list) else f[key]
                    r.fail(at, f"policy.{key}[{i}]", f"unknown pool '{pool_id}'; known: {', '.join(known)}")
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


def _predictor(r: Reader, node: Node, path: str) -> PredictorSpec:
    """`name` or `{name: ..., option: value}`; each predictor reads and checks its own options."""
    if isinstance(node, MappingNode):
        names = [v for k, v in node.value if k.value == "name"]
        name_node = names[0] if names else None
    else:
        name_node = node
    name = r.text(name_node, path) if name_node is not None else ""
    if not name:
        if name_node is None:
            r.fail(node, f"{path}.name", "missing required field")
        return PredictorSpec()
    try:
        predictor = get_predictor(name)
    except UnknownNameError as exc:
        r.fail(name_node, path, str(exc))
        return PredictorSpec(name)
    if not isinstance(node, MappingNode):
        if predictor.required:
            need = ", ".join(f"{k}: ..." for k in predictor.required)
            r.fail(node, path, f"predictor '{name}' needs {', '.join(predictor.required)}: write "
                               f"{{name: {name}, {need}}}")
        return PredictorSpec(name)
    f = r.mapping(node, path, required=("name", *predictor.required), optional=predictor.keys)
    f.pop("name", None)
    options = predictor.read(r, f, path)
    for key, message in predictor.check(options):
        top = key.split(".")[0]
        if top in options:  # one missing or unreadable is reported already
            r.fail(_option_node(f.get(top), key) or node, f"{path}.{key}", message)
    return PredictorSpec(name, options)


FAULT_FIELDS = ("failures_per_device_hour", "repair_s", "throttled_share", "throttled_clock")


def _faults(r: Reader, node: Node, path: str, registry: Registry) -> FaultSpec:
    """`telemetry` (the default), `off`, or a mapping: window_days, repair_s, and per-pool figures."""
    if not isinstance(node, MappingNode):
        return FaultSpec(mode=r.choice(node, path, FAULT_MODES) or "telemetry")
    f = r.mapping(node, path, required=(), optional=("mode", "window_days", "repair_s", "pools"))
    positive = lambda n, p: r.number(n, p, gt=0)  # noqa: E731
    pools: dict[str, PoolFaults] = {}
    known = [p.id for p in registry.pools]
    for pool_id, item in (r.free_mapping(f["pools"], f"{path}.pools").items() if "pools" in f else ()):
        sub = f"{path}.pools.{pool_id}"
        if pool_id not in known:
            r.fail(item, sub, f"unknown pool '{pool_id}'; known: {', '.join(known)}")
            continue
        g = r.mapping(item, sub, required=(), optional=FAULT_FIELDS)
        pools[pool_id] = PoolFaults(
            failures_per_device_hour=r.optional(g, "failures_per_device_hour", sub,
                                                lambda n, p: r.number(n, p, ge=0), 0.0),
            repair_s=r.optional(g, "repair_s", sub, positive, None),
            throttled_share=r.optional(g, "throttled_share", sub, lambda n, p: r.number(n, p, ge=0, le=1), 0.0),
            throttled_clock=r.optional(g, "throttled_clock", sub, lambda n, p: r.number(n, p, gt=0, le=1), 1.0))
    return FaultSpec(mode=r.optional(f, "mode", path, lambda n, p: r.choice(n, p, FAULT_MODES), "telemetry"),
                     window_days=r.optional(f, "window_days", path, positive, 7.0),
                     repair_s=r.optional(f, "repair_s", path, positive, 900.0), pools=pools)


def _option_node(node: Node | None, key: str) -> Node | None:
    """The node of an option (or of one entry of a mapping option, for `tiers.premium`)."""
    if node is None or "." not in key or not isinstance(node, MappingNode):
        return node
    entry = key.split(".", 1)[1]
    return next((v for k, v in node.value if str(k.value) == entry), node)


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


def _spreads(r: Reader, node: Node, path: str, registry: Registry) -> dict[str, float]:
    """step_time_spread: {pool: factor >= 1}, each a known pool."""
    known = [p.id for p in registry.pools]
    out = {}
    for pool_id, item in r.free_mapping(node, path).items():
        if pool_id not in known:
            r.fail(item, f"{path}.{pool_id}", f"unknown pool '{pool_id}'; known: {', '.join(known)}")
            continue
        out[pool_id] = r.number(item, f"{path}.{pool_id}", ge=1)
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
        g = r.mapping(item, sub, required=(), optional=(*OVERRIDE_FIELDS, "spread"))
        values = {key: r.optional(g, key, sub, override_value(r, key), None) for key in OVERRIDE_FIELDS
                  if key != "enabled"}
        values["enabled"] = r.optional(g, "enabled", sub, r.boolean, True)
        out[pool_id] = PoolOverride(**values, spread=r.optional(g, "spread", sub, lambda n, p: _spread(r, n, p), None))
    return out


def _spread(r: Reader, node: Node, path: str) -> dict[str, float]:
    """A pool's spread: fitted coefficient -> its standard error as a factor (at least 1)."""
    out = {}
    for name, value in r.mapping(node, path, required=(), optional=FITTED_NAMES).items():
        out[name] = r.number(value, f"{path}.{name}", ge=1)
    return out


def override_value(r: Reader, key: str) -> Callable[[Node, str], Any]:
    """The reader of one override field (shared by candidate files and sweep grids)."""
    if key in INT_OVERRIDES:
        return lambda n, p: r.integer(n, p, ge=0 if key == "max_queue" else 1)
    if key in RATIO_OVERRIDES:
        return lambda n, p: r.number(n, p, gt=0, le=1)
    if key in POSITIVE_OVERRIDES:
        return lambda n, p: r.number(n, p, gt=0)
    if key in NONNEGATIVE_OVERRIDES:
        return lambda n, p: r.number(n, p, ge=0)
    if key in SHARE_OVERRIDES:
        return lambda n, p: r.number(n, p, ge=0, le=1)
    if key == "kv_cache_dtype":
        return lambda n, p: r.choice(n, p, tuple(KV_CACHE_DTYPES))
    if key == "schedule":
        return lambda n, p: r.choice(n, p, SCHEDULES)
    return r.boolean


def candidate_to_dict(c: Candidate) -> dict[str, Any]:
    """Plain data in the candidate file's own schema (for JSON storage and YAML output)."""
    policy: Any = c.policy if not c.policy_options else {
        "name": c.policy, **{k: list(v) if k in POOL_LISTS or len(v) != 1 else v[0]
                             for k, v in c.policy_options.items()}}
    out: dict[str, Any] = {"name": c.name, "policy": policy, "overflow": c.overflow, "noise": c.noise}
    if c.drain_s is not None:
        out["drain_s"] = c.drain_s
    out["sla_tiers"] = {t: {k: v for k, v in dataclasses.asdict(s).items() if v is not None}
                        for t, s in sorted(c.sla_tiers.items())}
    out["pools"] = {p: {k: v for k, v in dataclasses.asdict(o).items() if v is not None and
                        not (k == "enabled" and v is True)} for p, o in sorted(c.pools.items())}
    out["predictor"] = predictor_to_data(c.predictor)
    if c.faults != FaultSpec():
        out["faults"] = c.faults.mode if c.faults == FaultSpec(mode=c.faults.mode) else {
            "mode": c.faults.mode, "window_days": c.faults.window_days, "repair_s": c.faults.repair_s,
            "pools": {p: {k: v for k, v in dataclasses.asdict(x).items() if v is not None}
                      for p, x in sorted(c.faults.pools.items())}}
    if c.step_time_spread:
        out["step_time_spread"] = dict(sorted(c.step_time_spread.items()))
    return out


def predictor_to_data(spec: PredictorSpec) -> Any:
    """A predictor as the candidate file writes it: its name, or a mapping with its options."""
    return spec.name if not spec.options else {"name": spec.name, **spec.options}
