"""The day-0 planner: for a model and some pools, every layout's memory, speed and money, ranked.

Pure: a registry (and optionally a calibrated candidate) in, a PlanReport out; `hetpool plan` and the console's
Plan tab print and draw it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from pool_registry import Model, Pool, Registry
from pool_registry.compat import Compat
from replay import encode
from replay.assumptions import assumptions
from replay.bands import bands
from replay.candidate import Candidate
from replay.costmodel import step_model
from replay.exceptions import ReplayError
from replay.fleet import PoolSpec
from replay.planner.compat import check
from replay.planner.layouts import Excluded, enumerate_layouts
from replay.planner.memory import memory, memory_wall
from replay.planner.rank import Plan, Targets, meets, meets_across_band, misses, rank
from replay.planner.timing import coefficients_of, engine_of, spec_of, time_layout

DEFAULT_CONCURRENCY = (1, 16, 64)
FLOPS_PER_PARAM = 2.0  # a forward pass multiplies and adds once per active parameter per token


class PlanError(ReplayError):
    """A plan that cannot be made as asked: an unknown model or pool, or settings that contradict each other."""


@dataclass(frozen=True)
class PlanSettings:
    """What to plan for: request lengths, the context each sequence must hold, concurrencies and targets."""

    isl: int = 1024
    osl: int = 128
    context: int | None = None     # None: isl + osl
    concurrency: tuple[int, ...] = DEFAULT_CONCURRENCY
    targets: Targets = field(default_factory=Targets)
    requests: int | None = None    # None: `replay bench`'s default per concurrency

    @property
    def tokens_per_sequence(self) -> int:
        """The KV cache one sequence needs: the context, else its prompt and output."""
        return self.context if self.context is not None else self.isl + self.osl


@dataclass(frozen=True)
class PoolWall:
    """The memory wall of one pool: the fewest devices that could hold the model at the largest concurrency."""

    pool: str
    min_devices: int | None   # None: a device cannot even hold the engine's working memory
    devices: int

    @property
    def pool_has_them(self) -> bool:
        """True when the pool has at least that many devices."""
        return self.min_devices is not None and self.min_devices <= self.devices


@dataclass(frozen=True)
class PlanReport:
    """Every plan best first, the excluded layouts, each pool's memory wall, why targets are missed, and each
    pool's compatibility verdict (the one `hetpool versions` gives, at the model's full context)."""

    model: str
    settings: PlanSettings
    plans: tuple[Plan, ...]
    excluded: tuple[Excluded, ...]
    walls: tuple[PoolWall, ...]
    misses: tuple[str, ...]
    compat: tuple[Compat, ...] = ()
    notes: tuple[str, ...] = ()  # what the timed layouts' step model assumes (replay.assumptions)

    @property
    def best(self) -> Plan | None:
        """The first plan that fits (and meets the targets, when there are any), or None."""
        first = next((p for p in self.plans if p.fits), None)
        if first is None or (self.settings.targets.any and not first.meets_targets):
            return None
        return first


def check_settings(s: PlanSettings, model: Model) -> None:
    """Refuse lengths and concurrencies that cannot be planned for, quoting the value."""
    if s.isl < 0 or s.osl < 1:
        raise PlanError(f"plan needs isl >= 0 and osl >= 1; got isl {s.isl}, osl {s.osl}")
    if not s.concurrency or min(s.concurrency) < 1:
        raise PlanError(f"plan needs concurrencies >= 1; got {list(s.concurrency)}")
    if s.context is not None and s.context < s.isl + s.osl:
        raise PlanError(f"context {s.context} is shorter than a request's isl + osl = {s.isl + s.osl} tokens")
    if s.tokens_per_sequence > model.max_context:
        raise PlanError(f"context {s.tokens_per_sequence} exceeds {model.id}'s max_context of {model.max_context}")
    for name, v in (("TTFT", s.targets.ttft_ms), ("TPOT", s.targets.tpot_ms)):
        if v is not None and not v > 0:
            raise PlanError(f"a {name} target must be > 0 ms; got {v!r}")


def pick_pools(registry: Registry, pool_ids: tuple[str, ...]) -> list[Pool]:
    """The named pools (all when none), refusing an unknown one in one line naming the known ones."""
    known = [p.id for p in registry.pools]
    for wanted in pool_ids:
        if wanted not in known:
            raise PlanError(f"unknown pool '{wanted}'; known: {', '.join(known)}")
    return [p for p in registry.pools if not pool_ids or p.id in pool_ids]


def pick_model(registry: Registry, model_id: str) -> Model:
    """The model, or one line naming the known ones."""
    for m in registry.models:
        if m.id == model_id:
            return m
    raise PlanError(f"unknown model '{model_id}'; known: {', '.join(m.id for m in registry.models) or '(none)'}")


def plan_pool(registry: Registry, pool: Pool, model: Model, settings: PlanSettings,
              candidate: Candidate | None = None) -> tuple[list[Plan], list[Excluded], PoolWall, tuple[str, ...]]:
    """One pool's plans (every kept layout at every concurrency), its excluded layouts, its memory wall and what
    the timed layouts' step model assumes."""
    chip = registry.chip_of(pool)
    layouts, excluded = enumerate_layouts(pool, chip, model)
    coefficients = coefficients_of(pool, candidate)
    spread = (candidate.override(pool.id).spread if candidate else None) or {}
    tokens = settings.tokens_per_sequence
    base = engine_of(pool)
    plans = []
    notes: dict[str, None] = {}
    for layout in layouts:
        for c in settings.concurrency:
            # the engine's step budget must decode every running sequence at once (as the serving block written)
            engine = dataclasses.replace(base, max_num_batched_tokens=max(base.max_num_batched_tokens, c))
            mem = memory(layout, model, chip, engine, tokens * c)
            plan = Plan(layout, c, mem)
            if mem.fits:
                spec = spec_of(registry, pool, model.id, layout, c, coefficients)
                point = time_layout(spec, c, settings.isl, settings.osl, settings.requests)
                notes.update(dict.fromkeys(assumptions(spec)))
                per_device = point.output_tok_s / layout.devices_per_replica
                tokens_done = point.requests * (settings.isl + settings.osl)
                cost = spec.replica_cost_per_s * point.duration_s / tokens_done * 1e6 if tokens_done else None
                flops = per_device * FLOPS_PER_PARAM * model.active_params_b * 1e9
                plan = dataclasses.replace(
                    plan, ttft_ms_p50=point.ttft_ms_p50, ttft_ms_p99=point.ttft_ms_p99,
                    tpot_ms_p50=point.tpot_ms_p50, tpot_ms_p99=point.tpot_ms_p99, output_tok_s_per_device=per_device,
                    usd_per_mtok=cost, mfu=flops / spec.peak_flops, encode_ms_per_image=_encoder_ms(spec))
                plan = dataclasses.replace(plan, meets_targets=meets(plan, settings.targets))
                if spread:
                    plan = _banded(plan, spec, spread, c, settings)
            plans.append(plan)
    most = tokens * max(settings.concurrency)
    wall = PoolWall(pool.id, memory_wall(model, chip, base, most, pool.devices_per_node), pool.devices)
    return plans, excluded, wall, tuple(notes)


def _encoder_ms(spec: PoolSpec) -> float | None:
    """Milliseconds the layout's vision encoder takes on one image (None for a text-only model)."""
    v = spec.model.vision
    return encode.seconds_per_patch(step_model(spec), spec.model) * v.patches_per_image * 1e3 if v else None


def _banded(plan: Plan, spec: PoolSpec, spread: dict[str, float], concurrency: int, settings: PlanSettings) -> Plan:
    """The plan with its p50 TTFT and TPOT bands from the fit's standard errors, marked when it meets the targets
    only inside them."""
    def medians(s: PoolSpec) -> tuple[float, float | None]:
        p = time_layout(s, concurrency, settings.isl, settings.osl, settings.requests)
        return p.ttft_ms_p50, p.tpot_ms_p50

    ttft, tpot = bands(spec, spread, medians)
    plan = dataclasses.replace(plan, ttft_band=ttft, tpot_band=tpot)
    return dataclasses.replace(plan, meets_in_band_only=plan.meets_targets and settings.targets.any
                               and not meets_across_band(plan, settings.targets))


def plan_model(registry: Registry, model_id: str, pool_ids: tuple[str, ...] = (),
               settings: PlanSettings | None = None, candidate: Candidate | None = None) -> PlanReport:
    """Plan a model on the named pools (default: all): every layout's memory, speed and money, best first."""
    settings = settings or PlanSettings()
    model = pick_model(registry, model_id)
    pools = pick_pools(registry, pool_ids)
    check_settings(settings, model)
    plans: list[Plan] = []
    excluded: list[Excluded] = []
    walls = []
    notes: dict[str, None] = {}
    for pool in pools:
        p, e, w, n = plan_pool(registry, pool, model, settings, candidate)
        plans += p
        excluded += e
        walls.append(w)
        notes.update(dict.fromkeys(n))
    ranked = rank(plans, settings.targets)
    return PlanReport(model.id, settings, tuple(ranked), tuple(excluded), tuple(walls),
                      tuple(misses(ranked, settings.targets)), tuple(check(registry, p, model) for p in pools),
                      tuple(notes))
