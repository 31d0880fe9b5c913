"""A pool's onboarding: each checklist item judged, the stages reached, and days from the start to each.

A stage is reached when every item of it and of every earlier stage passes, at the time its last evidence was
produced (never before the stage ahead of it). The current stage is the first one not reached. Inference
bring-up (with the text and image requests served, for a pool whose model declares `vision`) is measured against
the three-day bar: reached within three days of the start, or not. A pool with no
checklist at all (no sign-off or evidence file in the registry, none added since) is not tracked: nothing dates
its stages, so the bar is not judged and its declared stage is what is known (a canary serving traffic is not
"stuck at device abstraction").
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from canonical.timeunits import DAY_MS
from onboarding.facts import Facts
from onboarding.gates import PASS
from onboarding.items import applies, judge
from pool_registry import Registry
from pool_registry.onboarding import ITEMS, TRACK_STAGES

BRINGUP, BAR_DAYS = "inference_bringup", 3.0
DONE = "done"


@dataclass(frozen=True)
class Item:
    """One checklist line: pass, fail or pending, why, when, and the evidence files or sign-off behind it."""

    id: str
    title: str
    stage: str
    kind: str
    status: str
    reason: str
    at_ms: int | None
    files: tuple[tuple[str, str], ...] = ()  # (role, file name) of the stored evidence


@dataclass(frozen=True)
class Stage:
    """A stage with its state (done, current, todo), when it was reached and how many days after the start."""

    id: str
    title: str
    state: str
    reached_ms: int | None
    days: float | None


@dataclass(frozen=True)
class Track:
    """A pool's whole onboarding picture."""

    pool: str
    chip: str
    vendor: str
    declared: str
    started: dt.date | None
    stage: str
    stages: tuple[Stage, ...]
    items: tuple[Item, ...]
    now_ms: int
    tracked: bool = True  # the pool has a checklist: sign-offs or evidence files

    @property
    def stage_title(self) -> str:
        """Title of the current stage ('done' when all are reached)."""
        return next((s.title for s in self.stages if s.id == self.stage), DONE)

    @property
    def reached(self) -> int:
        """How many stages are done."""
        return sum(s.state == DONE for s in self.stages)

    @property
    def elapsed_days(self) -> float | None:
        """Days from the start to now."""
        return None if self.started is None else (self.now_ms - start_ms(self.started)) / DAY_MS

    def bringup(self) -> tuple[float | None, bool | None]:
        """(days to inference bring-up, or elapsed while not reached; met the three-day bar, None when unknown)."""
        stage = next(s for s in self.stages if s.id == BRINGUP)
        days = stage.days if stage.reached_ms is not None else self.elapsed_days
        if days is None or not self.tracked:
            return days, None
        if stage.reached_ms is None and days <= BAR_DAYS:
            return days, None
        return days, days <= BAR_DAYS

    def bar_text(self) -> str:
        """'inference bring-up reached in 2.5 days, within the three-day bar' and its variants."""
        days, met = self.bringup()
        reached = next(s for s in self.stages if s.id == BRINGUP).reached_ms is not None
        if not self.tracked:
            since = "" if days is None else f", started {days:.1f} days ago"
            return (f"inference bring-up not tracked: the registry has no checklist for this pool (declared stage "
                    f"{self.declared}{since}); add evidence with hetpool onboarding add-evidence to track it")
        if days is None:
            return "inference bring-up: no start date in the registry"
        verb = f"reached in {days:.1f} days" if reached else f"not reached after {days:.1f} days"
        judged = "" if met is None else ", within the three-day bar" if met else ", over the three-day bar"
        return f"inference bring-up {verb}{judged}"


def start_ms(day: dt.date) -> int:
    """Midnight UTC of a date in epoch ms."""
    return int(dt.datetime(day.year, day.month, day.day, tzinfo=dt.UTC).timestamp() * 1000)


def track(reg: Registry, pool_id: str, facts: Facts, now_ms: int) -> Track:
    """Judge every item and place the pool on its stages."""
    pool = reg.pool(pool_id)
    ob = pool.onboarding
    items = []
    for spec in ITEMS:
        if not applies(spec, reg, pool):  # a text-only model's bring-up has no image pipeline to prove
            continue
        out = judge(spec, ob.checks.get(spec.id), reg, pool, facts)
        files = tuple((e.role, e.name) for e in facts.files(spec.id).values())
        items.append(Item(spec.id, spec.title, spec.stage, spec.kind, out.status, out.reason, out.at_ms, files))
    start = start_ms(ob.started) if ob.started else None
    stages, before, current = [], start or 0, ""
    for sid, title in TRACK_STAGES:
        mine = [i for i in items if i.stage == sid]
        if not current and all(i.status == PASS for i in mine):
            before = max([before, *(i.at_ms for i in mine if i.at_ms is not None)])
            days = None if start is None else (before - start) / DAY_MS
            stages.append(Stage(sid, title, DONE, before, days))
            continue
        current = current or sid
        stages.append(Stage(sid, title, "current" if current == sid else "todo", None, None))
    chip = reg.chip_of(pool)
    tracked = bool(ob.checks) or any(i.files for i in items)
    return Track(pool.id, chip.name, chip.vendor, ob.stage, ob.started, current or DONE, tuple(stages),
                 tuple(items), now_ms, tracked)


def onboarding_pools(reg: Registry) -> tuple[str, ...]:
    """Pools still being onboarded: declared short of production, or with checklist evidence in the registry."""
    return tuple(p.id for p in reg.pools if p.onboarding.stage != "production" or p.onboarding.checks)
