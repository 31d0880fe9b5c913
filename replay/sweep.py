"""Sweeps: a grid of candidate variations, replayed in parallel processes, and their cost/p99-TTFT front.

Grid YAML: every key is a parameter, every value a list; the sweep is the cartesian product.

    parameters:
      policy: [sla_cost, cost_min]
      pools.h100-a.replicas: [8, 12, 16]
      pools.ascend-a.hourly_cost_per_device: [1.2, 1.5]

Parameters: `policy`, `overflow`, `noise`, and `pools.<pool id>.<override field>`.
"""

from __future__ import annotations

import dataclasses
import itertools
import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl
from yaml.nodes import Node

from pool_registry import Reader, Registry
from pool_registry.yamlread import read_text
from replay.candidate import (
    INT_OVERRIDES,
    OVERFLOW_MODES,
    OVERRIDE_FIELDS,
    RATIO_OVERRIDES,
    Candidate,
    PoolOverride,
)
from replay.engine import replay_summary
from replay.errors import GridError, UnknownNameError
from replay.policies import get_policy


@dataclass(frozen=True)
class Grid:
    """Parameter name -> values, in file order."""

    parameters: tuple[tuple[str, tuple[Any, ...]], ...]

    @property
    def size(self) -> int:
        """Number of points in the grid."""
        total = 1
        for _, values in self.parameters:
            total *= len(values)
        return total


def load_grid(path: str | Path, registry: Registry) -> Grid:
    """Read and validate a grid file against the fleet."""
    text = read_text(path, GridError)
    return load_grid_text(text, registry, str(path))


def _value(r: Reader, name: str, node: Node, path: str, registry: Registry) -> Any:
    if name == "policy":
        value = r.text(node, path)
        try:
            get_policy(value)
        except UnknownNameError as exc:
            r.fail(node, path, str(exc))
        return value
    if name == "overflow":
        return r.choice(node, path, OVERFLOW_MODES)
    if name == "noise":
        return r.number(node, path, ge=0, le=2)
    field = name.split(".")[-1]
    if field in INT_OVERRIDES:
        return r.integer(node, path, ge=0 if field == "max_queue" else 1)
    if field in RATIO_OVERRIDES:
        return r.number(node, path, gt=0, le=1)
    if field == "enabled":
        return r.boolean(node, path)
    return r.number(node, path, gt=0)


def load_grid_text(text: str, registry: Registry, source: str = "<grid>") -> Grid:
    """Validate grid YAML text; raise GridError listing every problem."""
    r = Reader(source)
    root = r.root(text, "a mapping with 'parameters'", GridError)
    top = r.mapping(root, "", required=("parameters",))
    known = [p.id for p in registry.pools]
    params = []
    for name, node in r.free_mapping(top["parameters"], "parameters").items() if "parameters" in top else []:
        path = f"parameters.{name}"
        parts = name.split(".")
        if name not in ("policy", "overflow", "noise"):
            if len(parts) != 3 or parts[0] != "pools":
                r.fail(node, path, f"unknown parameter '{name}'; expected policy, overflow, noise or "
                                   f"pools.<pool id>.<field>")
                continue
            if parts[1] not in known:
                r.fail(node, path, f"unknown pool '{parts[1]}'; known: {', '.join(known)}")
                continue
            if parts[2] not in OVERRIDE_FIELDS:
                r.fail(node, path, f"unknown field '{parts[2]}'; expected one of: {', '.join(OVERRIDE_FIELDS)}")
                continue
        items = r.sequence(node, path)
        if not items and isinstance(node.value, list):
            r.fail(node, path, "expected at least one value")
        params.append((name, tuple(_value(r, name, item, f"{path}[{i}]", registry) for i, item in enumerate(items))))
    if "parameters" in top and not params and not r.problems:
        r.fail(top["parameters"], "parameters", "expected at least one parameter")
    if r.problems:
        raise GridError(r.problems)
    return Grid(tuple(params))


def apply(base: Candidate, settings: dict[str, Any]) -> Candidate:
    """The base candidate with one grid point's settings."""
    top = {k: v for k, v in settings.items() if "." not in k}
    pools = dict(base.pools)
    for key, value in settings.items():
        if "." in key:
            _, pool_id, field = key.split(".")
            pools[pool_id] = dataclasses.replace(pools.get(pool_id, PoolOverride()), **{field: value})
    label = ",".join(f"{k}={v}" for k, v in settings.items())
    return dataclasses.replace(base, **top, pools=pools, name=f"{base.name}[{label}]")


def expand(grid: Grid, base: Candidate) -> list[tuple[dict[str, Any], Candidate]]:
    """Every grid point as (settings, candidate)."""
    names = [n for n, _ in grid.parameters]
    points = []
    for combo in itertools.product(*(values for _, values in grid.parameters)):
        settings = dict(zip(names, combo, strict=True))
        points.append((settings, apply(base, settings)))
    return points


BATCHES_PER_WORKER = 4  # few enough that the traffic is pickled rarely, enough to even out uneven points


def _evaluate(job: tuple[list[Candidate], pl.DataFrame, Registry, int]) -> list[dict[str, Any]]:
    """A batch of points in a worker process; everything it needs travels with it, so workers hold no state."""
    candidates, traffic, registry, seed = job
    return [replay_summary(c, traffic, registry, seed).to_dict() for c in candidates]


def run_sweep(points: list[tuple[dict[str, Any], Candidate]], traffic: pl.DataFrame, registry: Registry,
              seed: int = 0, workers: int = 1) -> pl.DataFrame:
    """Replay every point (in `workers` processes when > 1); one row per point with a `pareto` flag."""
    candidates = [c for _, c in points]
    if workers <= 1:
        summaries = [replay_summary(c, traffic, registry, seed).to_dict() for c in candidates]
    else:
        # spawn, not fork: a forked child can inherit Polars' thread pool mid-operation and deadlock.
        ctx = multiprocessing.get_context("spawn")
        size = max(1, -(-len(candidates) // (workers * BATCHES_PER_WORKER)))
        batches = [candidates[k:k + size] for k in range(0, len(candidates), size)]
        with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
            done = pool.map(_evaluate, [(batch, traffic, registry, seed) for batch in batches])
            summaries = [s for batch in done for s in batch]
    rows = []
    for (settings, cand), s in zip(points, summaries, strict=True):
        rows.append({**{k: str(v) for k, v in settings.items()}, "candidate": cand.name,
                     "cost_usd": s["cost_usd"], "ttft_p99": s["ttft_p99"], "e2e_p99": s["e2e_p99"],
                     "sla_violation_rate": s["sla_violation_rate"], "served": s["served"],
                     "rejected": s["rejected"], "cost_per_mtok": s["cost_per_mtok"]})
    frame = pl.DataFrame(rows)
    return frame.with_columns(pl.Series("pareto", pareto_front(frame["cost_usd"].to_list(),
                                                               frame["ttft_p99"].to_list())))


def pareto_front(cost: list[float], p99: list[float | None]) -> list[bool]:
    """True for points no other point beats on both cost and p99 TTFT (lower is better; None never wins)."""
    inf = float("inf")
    pts = [(c, inf if p is None else p) for c, p in zip(cost, p99, strict=True)]
    out = []
    for i, (c, p) in enumerate(pts):
        dominated = any((c2 <= c and p2 <= p and (c2 < c or p2 < p)) for j, (c2, p2) in enumerate(pts) if j != i)
        out.append(not dominated and p != inf)
    return out
