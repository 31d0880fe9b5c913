"""The Onboarding page's queries: the tracker per pool, and the evidence behind one pool's detail charts."""

from __future__ import annotations

import contextlib
from typing import Any

import duckdb
import polars as pl

from app.console.data import query
from onboarding import Track, onboarding_pools, read_facts
from onboarding.check_report import parse_check_report
from onboarding.evidence import parse_evidence, parse_loss_curve
from onboarding.exceptions import EvidenceError
from onboarding.gates import benchmark, deviations, key_steps
from onboarding.report import tracks
from onboarding.stability import growth, sustained_start
from pool_registry.onboarding import item_spec
from replay.candidate import Candidate
from replay.fleet import pools_by_id
from store import latest_registry


@query
def onboarding_tracks(con: duckdb.DuckDBPyConnection) -> tuple[Track, ...]:
    """Every pool being onboarded, tracked; empty without a registry."""
    snap = latest_registry(con)
    return () if snap is None else tracks(con, snap.registry, onboarding_pools(snap.registry))


@query
def onboarding_detail(con: duckdb.DuckDBPyConnection, pool: str) -> dict[str, Any]:
    """One pool's charts: loss curves with key-step deviations, hourly memory per device, each device's memory
    trend over the sustained run with the stability bound, benchmark against model, the families a stored
    `hetpool check` report found that no profile maps, and the stored evidence files (item, role, name, body) to
    download."""
    snap = latest_registry(con)
    if snap is None:
        return {}
    reg = snap.registry
    facts = read_facts(con, pool)
    out: dict[str, Any] = {"memory": facts.telemetry.memory, "files": [(e.item, e.role, e.name, e.body)
                                                                      for e in facts.evidence]}
    start = sustained_start(facts.telemetry)
    if start is not None:
        check = reg.pool(pool).onboarding.checks.get("stability")
        out["stability"] = (growth(facts.telemetry.memory, start), start, {
            **item_spec("stability").params, **(check.params if check else {})}["max_memory_growth"])
    curves = facts.files("regression")
    if {"baseline", "candidate"} <= set(curves):
        base, cand = (parse_loss_curve(curves[r].body, curves[r].name) for r in ("baseline", "candidate"))
        check = reg.pool(pool).onboarding.checks.get("regression")
        steps = (check.steps if check else ()) or key_steps(base, cand)
        out["curves"] = pl.concat([base.select("step", "loss", curve=pl.lit("baseline")),
                                   cand.select("step", "loss", curve=pl.lit("candidate"))])
        out["deviations"] = deviations(base, cand, steps)
    report = facts.files("metrics").get("report")
    if report is not None:
        with contextlib.suppress(EvidenceError):  # a bad report: the checklist says what is wrong with it
            out["unmapped"] = parse_check_report(report.body, report.name).unmapped
    bench = facts.files("benchmark").get("file")
    specs = pools_by_id(reg, Candidate(name="onboarding"))
    if bench is not None and pool in specs:
        check = reg.pool(pool).onboarding.checks.get("benchmark")
        tol = (check.params if check else {}).get("tolerance", item_spec("benchmark").params["tolerance"])
        out["bench"] = benchmark(parse_evidence("benchmark", bench.body, bench.name), specs[pool], tol)[1]
    return out
