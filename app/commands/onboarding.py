"""hetpool onboarding [POOL] | add-evidence POOL ITEM FILE...: the onboarding tracker, and evidence files for it."""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.commands._base import Context, add_command
from app.exceptions import UsageError

if TYPE_CHECKING:
    from onboarding import Item, Stage, Track

# The functions import the layers they use, so that `hetpool onboarding --help` loads none of them.

ADD = "add-evidence"
MARK = {"pass": "PASS", "fail": "FAIL", "pending": "....", "done": "[x]", "current": "[>]", "todo": "[ ]"}


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """Add the onboarding command."""
    p = add_command(sub, "onboarding", help="print each onboarding pool's stages, checklist (pass, fail, pending, "
                                            "with the evidence) and days from the start against the three-day "
                                            "bar; 'add-evidence POOL ITEM FILE...' stores an evidence file",
                    example="hetpool onboarding mlu370-a\n  hetpool onboarding add-evidence mlu370-a operators "
                            "examples/onboarding/mlu370-a/operators.csv", handler=run, common=common)
    p.add_argument("words", nargs="*", metavar="POOL | add-evidence POOL ITEM FILE",
                   help="a pool (default: every pool being onboarded), or add-evidence with the pool, the checklist "
                        "item (operators, benchmark, precision, regression: baseline then candidate, parallelism: "
                        "devices,mfu or a 'hetpool plan --json' report; "
                        "metrics: a 'hetpool check --json' report, until telemetry flows) and its file(s)")
    p.add_argument("--at", type=dt.date.fromisoformat, metavar="DATE",
                   help="add-evidence: the day the evidence was produced (YYYY-MM-DD; default now)")


def run(ctx: Context) -> int:
    """Dispatch on the first word: add-evidence, else print the tracker."""
    from onboarding import onboarding_pools
    from onboarding.report import tracks
    from pool_registry.yamlread import no_gc_pauses
    from store import require_registry

    words = ctx.args.words
    if words and words[0] == ADD:
        return _add(ctx, words[1:])
    if len(words) > 1:
        raise UsageError(f"expected at most one pool, got {' '.join(words)}; to store a file use "
                         f"'hetpool onboarding {ADD} POOL ITEM FILE'")
    if ctx.args.at is not None:
        raise UsageError(f"--at goes with '{ADD}'")
    # a large registry's objects live to the end: the collector need not walk them again and again meanwhile
    with no_gc_pauses(), ctx.store().read() as con:
        reg = require_registry(con)
        if words and words[0] not in {p.id for p in reg.pools}:
            raise UsageError(f"unknown pool {words[0]!r}; known: {', '.join(p.id for p in reg.pools)}")
        found = tracks(con, reg, tuple(words) or onboarding_pools(reg))
        if ctx.as_json:  # only the form printed is built: 10,000 pools make either one sizeable
            ctx.emit([_json(t) for t in found], "")
        else:
            ctx.emit(None, "\n\n".join(_text(t) for t in found) or "no pool is being onboarded")
    return 0


def _add(ctx: Context, words: list[str]) -> int:
    from onboarding.files import cli_files, store_files
    from store import require_registry

    if len(words) < 3:
        raise UsageError(f"usage: hetpool onboarding {ADD} POOL ITEM FILE [FILE]")
    pool, item, paths = words[0], words[1], words[2:]
    with ctx.store().read() as con:
        reg = require_registry(con)
    files = cli_files(reg, pool, item, paths)
    at = ctx.args.at
    if at is not None:
        when = dt.datetime(at.year, at.month, at.day, tzinfo=dt.UTC)
        files = tuple(dataclasses.replace(f, produced_at=when) for f in files)
    with ctx.store().transaction(f"hetpool onboarding {ADD} {pool} {item}") as con:
        new = store_files(con, files, "cli")
    names = ", ".join(f.name for f in files)
    ctx.emit({"pool": pool, "item": item, "files": [f.name for f in files], "stored": new},
             f"{pool} {item}: {names} checked and " + ("stored" if new else "unchanged since last stored"))
    return 0


def _json(t: Track) -> dict[str, Any]:
    from onboarding.tracker import BAR_DAYS

    days, met = t.bringup()
    return {"pool": t.pool, "chip": t.chip, "vendor": t.vendor, "declared_stage": t.declared,
            "started": t.started.isoformat() if t.started else None, "tracked": t.tracked, "stage": t.stage,
            "stages_done": t.reached,
            "elapsed_days": t.elapsed_days, "bringup": {"days": days, "bar_days": BAR_DAYS, "met": met},
            "stages": [_fields(s) for s in t.stages],
            "items": [{**_fields(i), "files": [{"role": r, "name": n} for r, n in i.files]} for i in t.items]}


def _fields(obj: Stage | Item) -> dict[str, Any]:
    """A stage's or item's fields by name: dataclasses.asdict without its deep copy, as every field is a scalar
    (an item's files are replaced by the caller)."""
    return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}


def _day(ms: int | None) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).strftime("%Y-%m-%d") if ms is not None else ""


def _text(t: Track) -> str:
    started = t.started.isoformat() if t.started else "no start date"
    where = (f"stage {t.stage_title} ({t.reached} of {len(t.stages)} stages done)" if t.tracked else
             f"declared stage {t.declared}")
    lines = [f"{t.pool} ({t.vendor} {t.chip}), started {started}: {where}; {t.bar_text()}"]
    for s in t.stages:
        when = f"  reached {_day(s.reached_ms)}, day {s.days:.1f}" if s.days is not None else \
            f"  reached {_day(s.reached_ms)}" if s.reached_ms else ""
        lines.append(f"  {MARK[s.state]} {s.title}{when}")
        for i in (i for i in t.items if i.stage == s.id):
            files = f" [{', '.join(Path(n).name for _, n in i.files)}]" if i.files else ""
            lines.append(f"        {MARK[i.status]} {i.title}: {i.reason}{files}")
    return "\n".join(lines)
