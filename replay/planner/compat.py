"""The one compatibility verdict of a model on a pool, which `hetpool versions`, `hetpool plan` and the Versions
page all show.

A model fits a pool's hardware when the chip supports its number formats and one layout the planner enumerates on
the pool (tensor parallelism within a node, pipeline stages across nodes, within the pool's devices, honouring the
divisibility rules of layouts.py) holds on each device its share of the weights, the engine's working memory and
the KV cache of one sequence at the model's full context (max_context), under gpu_memory_utilization
(memory.py). The cell names the smallest such layout. For the model a pool is configured to serve, the configured
replica must hold it too: when it does not while another layout does, the cell is FAIL, which a new serving block
fixes (`hetpool plan --write`). The versions the model requires come from pool_registry.compat.
"""

from __future__ import annotations

from pool_registry import Model, Pool, Registry
from pool_registry.compat import Compat, formats, verdict
from replay.planner.layouts import Layout, enumerate_layouts
from replay.planner.memory import Memory, memory, memory_wall
from replay.planner.timing import engine_of


def _smallest_first(layout: Layout) -> tuple[int, int, int]:
    return layout.devices_per_replica, layout.pp, layout.ep


def _needs(m: Memory, tokens: int) -> str:
    enc = f" with the vision encoder's {m.encoder_gb:.1f}" if m.encoder_gb else ""
    return (f"{m.used_gb:.1f} GB per device (weights {m.weights_gb:.1f}{enc}, KV cache of one {tokens:,}-token "
            f"sequence {m.kv_gb:.1f}, working memory {m.working_gb:.1f}) of {m.usable_gb:.1f} GB usable")


def check(registry: Registry, pool: Pool, model: Model) -> Compat:
    """Judge one model on one pool: number formats and memory on the planner's layouts, then required versions."""
    chip = registry.chip_of(pool)
    hardware = formats(model, pool, chip)
    if hardware:  # a format the chip lacks: no layout helps
        return verdict(model, pool, hardware, [])
    engine, tokens = engine_of(pool), model.max_context
    layouts, excluded = enumerate_layouts(pool, chip, model)
    sized = [(lay, memory(lay, model, chip, engine, tokens)) for lay in sorted(layouts, key=_smallest_first)]
    fitting = next(((lay, m) for lay, m in sized if m.fits), None)
    if fitting is None:
        if not sized:
            rule = excluded[0].reason if excluded else "the pool has no device"
            return verdict(model, pool, [f"no layout of the pool splits the model: {rule}"], [])
        closest, mem = min(sized, key=lambda lm: lm[1].shortfall_gb)
        wall = memory_wall(model, chip, engine, tokens, pool.devices_per_node)
        need = "" if wall is None else f"; it needs at least {wall} devices, the pool has {pool.devices}"
        wider = sorted((e for e in excluded if wall is not None and e.layout.devices_per_replica >= wall),
                       key=lambda e: _smallest_first(e.layout))
        if wall is not None and wall <= pool.devices and wider:  # enough devices, but no layout of them splits it
            need += f", but no layout of that many splits the model ({wider[0].layout.label}: {wider[0].reason})"
        return verdict(model, pool, [f"no layout of the pool holds it: the closest, {closest.label}, needs "
                                     f"{_needs(mem, tokens)}{need}"], [])
    best, _ = fitting
    held = f"{best.label} ({best.devices_per_replica} device{'s' if best.devices_per_replica > 1 else ''})"
    serving = pool.serving
    configured: list[str] = []
    if serving is not None and serving.model == model.id:
        mine = Layout(pool.id, serving.tp, serving.pp, serving.ep, serving.replicas)
        mem = memory(mine, model, chip, engine, tokens)
        if not mem.fits:
            configured.append(f"the configured replica ({mine.label}) needs {_needs(mem, tokens)}; {held} holds it "
                              f"(hetpool plan --model {model.id} --pool {pool.id} --write FILE)")
    return verdict(model, pool, [], configured, held)


def compatibility(registry: Registry, pools: tuple[str, ...] | list[str] = ()) -> tuple[Compat, ...]:
    """Every model against every pool (or the pools named), in registry order."""
    return tuple(check(registry, p, m) for m in registry.models for p in registry.pools if not pools or p.id in pools)
