"""hetpool versions: the version matrix, model x pool compatibility and metric coverage; exit 1 gates a rollout."""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import time
from typing import TYPE_CHECKING, Any

from app.commands._base import Context, add_command, duration_ms
from app.exceptions import UsageError
from canonical.timeunits import DAY_MS, HOUR_MS

if TYPE_CHECKING:
    import polars as pl

    from pool_registry.compat import Compat
    from store.views.versions import Cell
    from store.views.window import Window

# The functions import the layers they use, so that `hetpool versions --help` loads none of them.

COMPAT_COLUMNS = ("model", "pool", "status", "serves", "requirement")


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """Add the versions command."""
    p = add_command(sub, "versions", help="print declared against observed versions per pool (drift flagged), "
                                          "model x pool compatibility and metric coverage by exporter version; "
                                          "exit 1 on drift, an incompatible served model or a vanished metric",
                    example="hetpool versions --since 24h --csv compat.csv", handler=run, common=common)
    p.add_argument("--since", type=duration_ms, default=DAY_MS, metavar="DURATION",
                   help="window length, ending with the hour of the newest sample (default 24h)")
    p.add_argument("--pool", action="append", default=[], help="only this pool (repeatable)")
    p.add_argument("--csv", metavar="FILE", help="also write the compatibility table (model,pool,status,serves,"
                                                 "requirement) as CSV")


def window(con: Any, since_ms: int, pools: tuple[str, ...]) -> Window:
    """The last `since_ms` up to the end of the hour holding the newest sample (now when nothing is stored)."""
    from store.views.window import Window, data_span

    span = data_span(con)
    newest = span[1] if span else int(time.time() * 1000)
    end = newest - newest % HOUR_MS + HOUR_MS
    return Window(end - since_ms, end, pools)


def run(ctx: Context) -> int:
    """Read everything in one short read, print it, and exit 1 when anything would block a rollout."""
    from replay.planner.compat import compatibility
    from store import require_registry
    from store.views.coverage import exporter_coverage, vanished_metrics
    from store.views.versions import version_matrix

    a = ctx.args
    with ctx.store().read() as con:
        reg = require_registry(con)
        unknown = [p for p in a.pool if p not in {q.id for q in reg.pools}]
        if unknown:
            raise UsageError(f"unknown pool {unknown[0]!r}; known: {', '.join(p.id for p in reg.pools)}")
        w = window(con, a.since, tuple(a.pool))
        cells = version_matrix(con, reg, w)
        coverage = exporter_coverage(con, reg, w)
        vanished = vanished_metrics(con, reg, w)
    compat = compatibility(reg, tuple(a.pool))
    drifted = [c for c in cells if c.drift]
    blocked = [c for c in compat if c.serves and not c.ok]
    if a.csv:
        _write_csv(a.csv, compat)
    ok = not drifted and not blocked and vanished.is_empty()
    data = {"window": {"start_ms": w.start_ms, "end_ms": w.end_ms}, "ok": ok,
            "matrix": [_cell_json(c) for c in cells], "compatibility": [_compat_json(c) for c in compat],
            "coverage": coverage.to_dicts(), "vanished": vanished.to_dicts(),
            "drift": len(drifted), "incompatible_served": len(blocked), "vanished_metrics": vanished.height}
    ctx.emit(data, _text(w, cells, compat, coverage, vanished, ok))
    return 0 if ok else 1


def _write_csv(path: str, compat: tuple[Compat, ...]) -> None:
    import polars as pl

    rows = [(c.model, c.pool, c.status, c.serves, c.requirement) for c in compat]
    try:
        with open(path, "w", encoding="utf-8", newline="") as out:
            pl.DataFrame(rows, orient="row", schema=list(COMPAT_COLUMNS)).write_csv(out)
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror or exc}") from None


def _cell_json(c: Cell) -> dict[str, Any]:
    return {**dataclasses.asdict(c), "group": c.group, "observed": [{"version": v, "nodes": n} for v, n in c.observed]}


def _compat_json(c: Compat) -> dict[str, Any]:
    from replay.planner.report import compat_dict

    return compat_dict(c)


def _when(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).strftime("%Y-%m-%d %H:%M")


def _text(w: Window, cells: tuple[Cell, ...], compat: tuple[Compat, ...], coverage: pl.DataFrame,
          vanished: pl.DataFrame, ok: bool) -> str:
    from pool_registry.compat import FRAMEWORK_INCOMPATIBLE
    from pool_registry.components import GROUP_TITLES

    lines = [f"version matrix, {_when(w.start_ms)} to {_when(w.end_ms)} UTC"]
    for c in cells:
        flag = f"   DRIFT: {c.reason}" if c.drift else ""
        lines.append(f"  {c.pool:<10} {GROUP_TITLES[c.group]:<16} {c.text()}{flag}")
        lines += [f"  {'':<10} {'':<16}   {n.node} runs {n.version} on {n.devices} device(s), "
                  f"{_when(n.first_seen)} to {_when(n.last_seen)}" for n in c.nodes]
    pools = list(dict.fromkeys(c.pool for c in compat))
    models = list(dict.fromkeys(c.model for c in compat))
    grid = {(c.model, c.pool): c for c in compat}
    width = max([len(FRAMEWORK_INCOMPATIBLE) + 3, *(len(p) + 2 for p in pools)])
    lines += ["", "compatibility (* = the pool serves the model)",
              f"  {'model':<18} " + "".join(f"{p:<{width}}" for p in pools)]
    for m in models:
        lines.append(f"  {m:<18} " + "".join(
            f"{grid[m, p].status + ('*' if grid[m, p].serves else ''):<{width}}" for p in pools))
    lines += [f"  {c.model} on {c.pool}: {c.status}{' (served)' if c.serves else ''}: {c.requirement}"
              for c in compat if not c.ok]
    lines += ["", "metric coverage by exporter version"]
    lines += [f"  {r['pool']:<10} exporter {r['exporter']}: {len(r['metrics'])} metrics on {r['nodes']} node(s)"
              for r in coverage.iter_rows(named=True)]
    lines += [f"  VANISHED {r['pool']}: {r['metric']} after exporter {r['before']} -> {r['after']} on "
              f"{', '.join(r['nodes'])} ({_when(r['upgraded_at'])})" for r in vanished.iter_rows(named=True)]
    drift = sum(c.drift for c in cells)
    blocked = sum(c.serves and not c.ok for c in compat)
    lines += ["", f"{'ok' if ok else 'blocked'}: {drift} drifted cell(s), {blocked} served model(s) incompatible, "
                  f"{vanished.height} vanished metric(s)"]
    return "\n".join(lines)
