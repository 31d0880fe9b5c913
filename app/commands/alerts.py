"""hetpool alerts: the console's status rules on its default window; exit 1 when anything is critical."""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import time

from app.commands._base import Context, add_command
from app.commands.versions import window
from app.status_read import read_facts
from canonical.timeunits import DAY_MS
from status.evaluate import evaluate
from status.rules import load_rules
from status.verdict import verdict
from store import require_registry


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """Add the alerts command."""
    p = add_command(sub, "alerts", help="evaluate the status rules on the console's default window (the last 24 "
                                        "hours up to the hour of the newest sample) and print every status that is "
                                        "not ok with its level, scope and reason; exit 1 when one is critical",
                    example="hetpool alerts --rules examples/site-rules.yaml --json", handler=run, common=common)
    p.add_argument("--rules", metavar="FILE", help="site rules over the shipped defaults (default: $HETPOOL_RULES)")


def run(ctx: Context) -> int:
    """Read the window's facts in one short read, judge them, print, and exit 1 on anything critical."""
    rules = load_rules(ctx.args.rules)
    now_ms = int(time.time() * 1000)
    with ctx.store().read() as con:
        reg = require_registry(con)
        pools = tuple(p.id for p in reg.pools)
        w = window(con, DAY_MS, ())
        facts = read_facts(con, w, list(pools), now_ms)
    statuses = evaluate(reg, rules, facts)
    level, sentence = verdict(statuses, pools)
    critical = sum(s.level == "critical" for s in statuses)
    data = {"window": {"start_ms": w.start_ms, "end_ms": w.end_ms}, "level": level, "verdict": sentence,
            "rules": list(rules.sources), "critical": critical,
            "warning": sum(s.level == "warning" for s in statuses),
            "statuses": [{**dataclasses.asdict(s), "where": s.where} for s in statuses]}
    lines = [f"status, {_when(w.start_ms)} to {_when(w.end_ms)} UTC: {sentence}"]
    lines += [f"  {s.level.upper():<8} {s.scope:<9} {s.where:<28} {s.reason}" for s in statuses]
    ctx.emit(data, "\n".join(lines))
    return 1 if critical else 0


def _when(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).strftime("%Y-%m-%d %H:%M")
