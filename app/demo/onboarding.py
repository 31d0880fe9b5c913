"""The demo's onboarding pool: its registry dates moved to the demo's window, its evidence files found."""

from __future__ import annotations

import dataclasses
import datetime as dt
import shutil
from pathlib import Path

from pool_registry import Registry

# The pool being onboarded (the one with a checklist) started this many days before the demo ends, whenever the
# demo is built, so the tracker shows it part-way through (past the three-day bar for inference bring-up) on any
# day.
STARTED_DAYS_AGO = 5


def plant_onboarding(reg: Registry, end_ms: int, base: Path) -> Registry:
    """Shift the dates of the pools being onboarded (declared short of production, or with checks) by one offset,
    so the pool with checks started STARTED_DAYS_AGO days before the window's end and the others keep their
    distance to it (a canary that started months before stays months ahead of it, whenever the demo is built);
    evidence paths become absolute under base."""
    end_day = dt.datetime.fromtimestamp(end_ms / 1000, dt.UTC).date()
    anchor = next((p.onboarding.started for p in reg.pools if p.onboarding.checks and p.onboarding.started), None)
    shift = end_day - dt.timedelta(days=STARTED_DAYS_AGO) - anchor if anchor else dt.timedelta(0)
    pools = []
    for p in reg.pools:
        ob = p.onboarding
        if ob.stage == "production" and not ob.checks:
            pools.append(p)
            continue
        checks = {k: dataclasses.replace(
            c, at=c.at + shift if c.at else None,
            files={role: str((base / f).resolve()) for role, f in c.files.items()}) for k, c in ob.checks.items()}
        started = ob.started + shift if ob.started else None
        pools.append(dataclasses.replace(p, onboarding=dataclasses.replace(ob, started=started, checks=checks)))
    return dataclasses.replace(reg, pools=tuple(pools))


def localize_evidence(reg: Registry, folder: Path, sub: str) -> Registry:
    """The registry with every evidence file copied under folder/sub/POOL and named relative to folder, so a
    fleet file written in folder loads from there (evidence is read only under the registry file's folder)."""
    pools = []
    for p in reg.pools:
        ob = p.onboarding
        if not ob.checks:
            pools.append(p)
            continue
        target = folder / sub / p.id
        target.mkdir(parents=True, exist_ok=True)
        checks = {}
        for k, c in ob.checks.items():
            files = {}
            for role, f in c.files.items():
                copy = target / Path(f).name
                shutil.copyfile(f, copy)
                files[role] = copy.relative_to(folder).as_posix()
            checks[k] = dataclasses.replace(c, files=files)
        pools.append(dataclasses.replace(p, onboarding=dataclasses.replace(ob, checks=checks)))
    return dataclasses.replace(reg, pools=tuple(pools))
