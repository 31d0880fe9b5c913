"""Sweeps: a grid of candidate variations, replayed in parallel processes or on Ray, and their cost/p99-TTFT front.

Grid YAML: every key is a parameter, every value a list; the sweep is the cartesian product.

    parameters:
      policy: [sla_cost, cost_min]
      pools.h100-a.replicas_scale: [0.5, 1, 2]
      pools.ascend-a.hourly_cost_per_device: [1.2, 1.5]

Parameters: `policy`, `overflow`, `noise`, and `pools.<pool id>.<override field>`. A point is on the Pareto
front when no other point is at least as good on busy cost, provisioned cost and p99 TTFT at once and better
on one: routing changes move busy cost, capacity changes move provisioned cost.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import multiprocessing
import sys
import types
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl
from yaml.nodes import Node

from pool_registry import Reader, Registry
from pool_registry.yamlread import read_text
from replay.candidate import OVERFLOW_MODES, OVERRIDE_FIELDS, Candidate, PoolOverride
from replay.candidate_loader import override_value
from replay.engine import replay_summary
from replay.exceptions import GridError, UnknownNameError
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
    return override_value(r, name.split(".")[-1])(node, path)


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
EXECUTORS = ("process", "ray")
Progress = Callable[[float, str], None]


Job = tuple[list[Candidate], pl.DataFrame, Registry, int, pl.DataFrame | None, pl.DataFrame | None]


def _evaluate(job: Job) -> list[dict[str, Any]]:
    """A batch of points in a worker process; everything it needs travels with it, so workers hold no state."""
    candidates, traffic, registry, seed, history, telemetry = job
    return [replay_summary(c, traffic, registry, seed, history, telemetry).to_dict() for c in candidates]


def batches(candidates: list[Candidate], workers: int) -> list[list[Candidate]]:
    """The points cut into about BATCHES_PER_WORKER batches per worker, in order."""
    size = max(1, -(-len(candidates) // (workers * BATCHES_PER_WORKER)))
    return [candidates[k:k + size] for k in range(0, len(candidates), size)]


@contextlib.contextmanager
def _importable_main() -> Iterator[None]:
    """While workers are spawned, a `__main__` they need not run.

    A spawned worker first runs its parent's main script again unless that is an importable module. Under
    Streamlit the main module is the page being drawn (a script by path, with no module spec), which a worker
    must not run; a plain module stands in for it until the pool is up.
    """
    main = sys.modules.get("__main__")
    if main is None or getattr(main, "__spec__", None) is not None or not getattr(main, "__file__", None):
        yield
        return
    sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        yield
    finally:
        sys.modules["__main__"] = main


def run_sweep(points: list[tuple[dict[str, Any], Candidate]], traffic: pl.DataFrame, registry: Registry,
              seed: int = 0, workers: int = 1, *, executor: str = "process", address: str | None = None,
              progress: Progress | None = None, history: pl.DataFrame | None = None,
              telemetry: pl.DataFrame | None = None) -> pl.DataFrame:
    """Replay every point (in `workers` processes when > 1, or on a Ray cluster); one row per point with a
    `pareto` flag. Every point is a pure function of its candidate, the traffic, the requests before it (the
    online predictor's start) and the fault telemetry, so where it runs does not change its numbers."""
    if executor not in EXECUTORS:
        raise UnknownNameError(f"unknown sweep executor '{executor}'; known: {', '.join(EXECUTORS)}")
    candidates = [c for _, c in points]
    say = progress or (lambda share, what: None)
    summaries: list[dict[str, Any]] = []
    if executor == "ray":
        from replay.sweep_ray import ray_summaries

        summaries = ray_summaries(batches(candidates, max(1, workers)), traffic, registry, seed, address, say,
                                  history, telemetry)
    elif workers <= 1:
        for k, c in enumerate(candidates):
            say(k / len(candidates), f"point {k + 1} of {len(candidates)}: {c.name}")
            summaries.append(replay_summary(c, traffic, registry, seed, history, telemetry).to_dict())
    else:
        # spawn, not fork: a forked child can inherit Polars' thread pool mid-operation and deadlock.
        ctx = multiprocessing.get_context("spawn")
        with _importable_main(), ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
            jobs: list[Job] = [(batch, traffic, registry, seed, history, telemetry)
                               for batch in batches(candidates, workers)]
            done = pool.map(_evaluate, jobs)
            for batch in done:
                summaries += batch
                say(len(summaries) / len(candidates), f"{len(summaries)} of {len(candidates)} points")
    say(1.0, "done")
    rows = []
    for (settings, cand), s in zip(points, summaries, strict=True):
        rows.append({**{k: str(v) for k, v in settings.items()}, "candidate": cand.name,
                     "busy_cost_usd": s["busy_cost_usd"], "provisioned_cost_usd": s["provisioned_cost_usd"],
                     "ttft_p50": s["ttft_p50"], "ttft_p99": s["ttft_p99"], "tpot_p50": s["tpot_p50"],
                     "e2e_p99": s["e2e_p99"],
                     "sla_violation_rate": s["sla_violation_rate"], "served": s["served"],
                     "rejected": s["rejected"], "cost_per_mtok": s["cost_per_mtok"],
                     "retried": s.get("retried", 0), "predictor": s.get("predictor", "")})
    frame = pl.DataFrame(rows)
    return frame.with_columns(pl.Series("pareto", pareto_front(
        frame["busy_cost_usd"].to_list(), frame["ttft_p99"].to_list(), frame["provisioned_cost_usd"].to_list())))


def pareto_front(cost: list[float], p99: list[float | None], provisioned: list[float] | None = None) -> list[bool]:
    """True for points no other point beats on busy cost, provisioned cost and p99 TTFT (lower is better;
    a point without a p99 never wins)."""
    inf = float("inf")
    prov = provisioned if provisioned is not None else [0.0] * len(cost)
    pts = [(c, inf if p is None else p, q) for c, p, q in zip(cost, p99, prov, strict=True)]
    out = []
    for i, a in enumerate(pts):
        dominated = any(all(y <= x for x, y in zip(a, b, strict=True)) and b != a
                        for j, b in enumerate(pts) if j != i)
        out.append(not dominated and a[1] != inf)
    return out
