"""Sweep points on a Ray cluster: the same batches the process executor makes, as Ray tasks.

The traffic and the registry go into the object store once and every task reads them from there; each task
returns its batch's summaries, which come back in grid order, so the table equals the process executor's for
the same seed. Without an address a local cluster is started for the sweep and stopped after it; with one,
the sweep joins that cluster (`ray start --head` on some machine) and ships this package's replay code to its
workers, which need only the same Python and hetpool's dependencies.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import polars as pl

import canonical
import pool_registry
import replay
from pool_registry import Registry
from replay.candidate import Candidate
from replay.engine import replay_summary
from replay.exceptions import ReplayError

RAY_MISSING = "the ray executor needs Ray, which is not installed; install it with: pip install 'hetpool[ray]'"


def _batch(candidates: list[Candidate], traffic: pl.DataFrame, registry: Registry, seed: int,
           history: pl.DataFrame | None = None, telemetry: pl.DataFrame | None = None) -> list[dict[str, Any]]:
    """One batch of points, run by a Ray worker."""
    return [replay_summary(c, traffic, registry, seed, history, telemetry).to_dict() for c in candidates]


def _connect(ray: Any, address: str | None) -> bool:
    """Join (or start) a cluster unless this process is already in one; True when this call started it."""
    if ray.is_initialized():
        return False
    options: dict[str, Any] = {"logging_level": "WARNING", "log_to_driver": False}
    if address:
        options.update(address=address, runtime_env={"py_modules": [replay, pool_registry, canonical]})
    else:
        options.update(include_dashboard=False)
    try:
        ray.init(**options)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        where = f"the Ray cluster at {address}" if address else "a local Ray cluster"
        raise ReplayError(f"cannot use {where}: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
                          ) from None
    return True


def ray_summaries(batches: list[list[Candidate]], traffic: pl.DataFrame, registry: Registry, seed: int,
                  address: str | None, progress: Callable[[float, str], None], history: pl.DataFrame | None = None,
                  telemetry: pl.DataFrame | None = None) -> list[dict[str, Any]]:
    """Every batch's summaries, in order, computed as Ray tasks."""
    try:
        import ray
    except ImportError:
        raise ReplayError(RAY_MISSING) from None
    started = _connect(ray, address)
    try:
        task = ray.remote(_batch)
        traffic_ref, registry_ref = ray.put(traffic), ray.put(registry)
        refs = [task.remote(batch, traffic_ref, registry_ref, seed, history, telemetry) for batch in batches]
        total = sum(len(b) for b in batches)
        sizes = {ref: len(b) for ref, b in zip(refs, batches, strict=True)}
        pending, done = list(refs), 0
        while pending:
            finished, pending = ray.wait(pending, num_returns=1)
            done += sum(sizes[r] for r in finished)
            progress(done / total, f"{done} of {total} points on Ray")
        return [s for batch in ray.get(refs) for s in batch]
    finally:
        if started:
            ray.shutdown()
