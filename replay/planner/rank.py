"""Which planned layouts meet the latency targets, their order, and what is missing when none does.

Targets are on the median (p50) TTFT and TPOT of the closed loop, the figures a plan reports. With targets, the
layouts that meet them come first, cheapest busy $ per million tokens first; with none, the highest output
tokens/s per device first. Layouts that fit but miss a target follow in the same order, then those that do not
fit memory, least short first.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from replay.planner.layouts import Layout
from replay.planner.memory import Memory


@dataclass(frozen=True)
class Targets:
    """Latency targets in ms (None: no target)."""

    ttft_ms: float | None = None
    tpot_ms: float | None = None

    @property
    def any(self) -> bool:
        """True when at least one target is set."""
        return self.ttft_ms is not None or self.tpot_ms is not None


@dataclass(frozen=True)
class Plan:
    """One layout at one concurrency: its memory, and when it fits, its speed and money."""

    layout: Layout
    concurrency: int
    memory: Memory
    ttft_ms_p50: float | None = None
    ttft_ms_p99: float | None = None
    tpot_ms_p50: float | None = None
    tpot_ms_p99: float | None = None
    output_tok_s_per_device: float | None = None
    usd_per_mtok: float | None = None
    mfu: float | None = None          # output tokens' model FLOPs per device over the chip's peak (prompts not counted)
    meets_targets: bool = False
    ttft_band: tuple[float, float] | None = None   # p50 TTFT within the fit's standard errors (replay.bands)
    tpot_band: tuple[float, float] | None = None
    meets_in_band_only: bool = False  # meets the targets at the fit's values, not at the band's far end
    encode_ms_per_image: float | None = None  # a vision-language model's encoder on one image, on this layout

    @property
    def fits(self) -> bool:
        """True when the layout's memory fits at this concurrency."""
        return self.memory.fits


def meets(plan: Plan, targets: Targets) -> bool:
    """True when a fitting plan's p50 TTFT and TPOT are within the targets (a missing TPOT meets nothing)."""
    if not plan.fits:
        return False
    for target, value in ((targets.ttft_ms, plan.ttft_ms_p50), (targets.tpot_ms, plan.tpot_ms_p50)):
        if target is not None and (value is None or value > target):
            return False
    return True


def meets_across_band(plan: Plan, targets: Targets) -> bool:
    """True when a plan meets the targets at the far (slow) end of its bands too."""
    return meets(dataclasses.replace(plan, ttft_ms_p50=plan.ttft_band[1] if plan.ttft_band else plan.ttft_ms_p50,
                                     tpot_ms_p50=plan.tpot_band[1] if plan.tpot_band else plan.tpot_ms_p50), targets)


def rank_key(plan: Plan, targets: Targets) -> tuple[int, float, str, int, int, int, int, int]:
    """Sort key: meeting first, then fitting, then not fitting; within, by $/Mtok or tok/s per device."""
    lay = plan.layout
    tail = (lay.pool, lay.tp, lay.pp, lay.ep, lay.attention_dp, plan.concurrency)
    if not plan.fits:
        return (2, plan.memory.shortfall_gb, *tail)
    group = 0 if plan.meets_targets else 1
    if targets.any:
        return (group, plan.usd_per_mtok if plan.usd_per_mtok is not None else math.inf, *tail)
    return (group, -(plan.output_tok_s_per_device or 0.0), *tail)


def rank(plans: list[Plan], targets: Targets) -> list[Plan]:
    """The plans best first."""
    return sorted(plans, key=lambda p: rank_key(p, targets))


def misses(plans: list[Plan], targets: Targets) -> list[str]:
    """When no fitting plan meets the targets: which target fails and by how much, from the closest plan."""
    fitting = [p for p in plans if p.fits]
    if not targets.any or not fitting or any(p.meets_targets for p in fitting):
        return []
    out = []
    for name, target, attr in (("TTFT", targets.ttft_ms, "ttft_ms_p50"), ("TPOT", targets.tpot_ms, "tpot_ms_p50")):
        if target is None:
            continue
        timed = [p for p in fitting if getattr(p, attr) is not None]
        if not timed:
            out.append(f"{name} p50 <= {target:g} ms: no fitting layout produces a {name}")
            continue
        best = min(timed, key=lambda p: getattr(p, attr))
        value = getattr(best, attr)
        if value > target:
            out.append(f"{name} p50 <= {target:g} ms fails: the fastest layout ({best.layout.pool} "
                       f"{best.layout.label} at concurrency {best.concurrency}) reaches {value:.1f} ms, "
                       f"{value - target:.1f} ms ({(value - target) / target:.0%}) over")
    if not out:  # each target alone is met somewhere, both together nowhere
        closest = min(fitting, key=lambda p: sum(max(0.0, (v or math.inf) / t - 1.0) for t, v in (
            (targets.ttft_ms, p.ttft_ms_p50), (targets.tpot_ms, p.tpot_ms_p50)) if t is not None))
        out.append(f"each target is met by some layout but no layout meets them together; closest: "
                   f"{closest.layout.pool} {closest.layout.label} at concurrency {closest.concurrency} with TTFT "
                   f"p50 {closest.ttft_ms_p50:.1f} ms and TPOT p50 {_ms(closest.tpot_ms_p50)}")
    return out


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v:.1f} ms"
