"""Judging each checklist item of a pool from its registry check and the facts the store holds."""

from __future__ import annotations

import dataclasses

from canonical.metrics import CORE_METRICS
from canonical.timeunits import epoch_ms
from onboarding import gates
from onboarding.check_report import judge_report, parse_check_report
from onboarding.evidence import parse_evidence
from onboarding.exceptions import EvidenceError
from onboarding.facts import Facts
from onboarding.gates import FAIL, PASS, PENDING, Outcome
from onboarding.plan_report import judge_plan
from onboarding.stability import stability
from pool_registry import Pool, Registry
from pool_registry.onboarding import MANUAL, Check, ItemSpec
from replay.candidate import Candidate
from replay.fleet import pools_by_id


def applies(spec: ItemSpec, reg: Registry, pool: Pool) -> bool:
    """Whether a pool's checklist has the item: the multimodal bring-up only where its model declares `vision`."""
    if spec.id != "multimodal":
        return True
    return pool.serving is not None and reg.model(pool.serving.model).vision is not None


def judge(spec: ItemSpec, check: Check | None, reg: Registry, pool: Pool, facts: Facts) -> Outcome:
    """The outcome of one item."""
    params = {**spec.params, **(check.params if check else {})}
    if spec.kind == MANUAL:
        return _manual(check)
    if spec.id == "capabilities":
        c = reg.chip_of(pool)
        return Outcome(PASS, f"{c.name}: {c.peak_tflops_bf16:g} TFLOPS bf16, {c.hbm_capacity_gb:g} GB HBM at "
                             f"{c.hbm_bw_tbps:g} TB/s, {c.interconnect.kind} {c.interconnect.bw_gbps:g} GB/s, "
                             f"dtypes {', '.join(c.supported_dtypes)}")
    if spec.id == "metrics":
        return _metrics(pool, facts)
    if spec.id == "routing":
        return _routing(pool, facts)
    if spec.id == "replay_gate":
        return _gate(facts)
    if spec.id == "stability":
        return stability(facts.telemetry, params["hours"], params["max_memory_growth"])
    return _files(spec, check, reg, pool, facts, params)




def _manual(check: Check | None) -> Outcome:
    if check is None or check.at is None:
        return Outcome(PENDING, "no sign-off yet")
    text = f"signed off by {check.by} on {check.at.isoformat()}" + (f": {check.note}" if check.note else "")
    return Outcome(PASS if check.result == "pass" else FAIL, text, epoch_ms(check.at))


def _metrics(pool: Pool, facts: Facts) -> Outcome:
    if facts.metrics.is_empty():
        report = facts.files("metrics").get("report")
        if report is None:
            return Outcome(PENDING, "no canonical metric stored for the pool yet (a 'hetpool check --json' report "
                                    "of its exporter can stand in: hetpool onboarding add-evidence "
                                    f"{pool.id} metrics REPORT)")
        try:
            parsed = parse_check_report(report.body, report.name)
        except EvidenceError as exc:
            return Outcome(FAIL, str(exc))
        return judge_report(parsed, epoch_ms(report.produced_at))
    seen = dict(zip(facts.metrics["metric"].to_list(), facts.metrics["first_ms"].to_list(), strict=True))
    heard = f"{len(seen)} canonical metrics from {facts.devices_heard} of {pool.devices} devices"
    missing = [m for m in CORE_METRICS if m not in seen]
    rejects, example = facts.rejects
    if missing:
        return Outcome(FAIL, f"{heard}; missing {', '.join(missing)}")
    if rejects:
        return Outcome(FAIL, f"{heard}; {rejects} unexplained reject(s), for example: {example}")
    return Outcome(PASS, f"{heard}; no unexplained rejects", max(int(seen[m]) for m in CORE_METRICS))


def _routing(pool: Pool, facts: Facts) -> Outcome:
    if pool.serving is None:
        return Outcome(PENDING, "the pool has no serving config")
    served, first = facts.routed
    if not served:
        return Outcome(PENDING, f"configured to serve {pool.serving.model}; no observed request routed to it yet")
    return Outcome(PASS, f"{served:,} observed requests served", first)


def _gate(facts: Facts) -> Outcome:
    run = facts.gate
    if run is None:
        return Outcome(PENDING, "no gated replay has sent traffic to the pool yet")
    name = f" ({run['name']})" if run["name"] else ""
    at = epoch_ms(run["created_at"])
    if run["verdict"] == "pass":
        return Outcome(PASS, f"replay run #{run['run_id']}{name} passed its gate", at)
    return Outcome(FAIL, f"replay run #{run['run_id']}{name} failed its gate: {'; '.join(run['reasons'])}", at)


def _files(spec: ItemSpec, check: Check | None, reg: Registry, pool: Pool, facts: Facts,
           params: dict[str, float]) -> Outcome:
    stored = facts.files(spec.id)
    missing = [r for r in spec.roles if r not in stored]
    if missing:
        named = check.files.get(missing[0]) if check else None
        hint = (f"{named} is named in the registry but not stored; run hetpool registry load" if named else
                f"add it with: hetpool onboarding add-evidence {pool.id} {spec.id} {' '.join(spec.roles).upper()}")
        what = "evidence" if missing == ["file"] else " and ".join(missing)
        return Outcome(PENDING, f"no {what} file yet; {hint}")
    try:
        frames = {r: parse_evidence(spec.id, e.body, e.name) for r, e in stored.items()}
    except EvidenceError as exc:
        return Outcome(FAIL, str(exc))
    at = max(epoch_ms(e.produced_at) for e in stored.values())
    if spec.id == "operators":
        out = gates.operators(frames["file"])
    elif spec.id == "precision":
        out = gates.precision(frames["file"], params["max_grad_norm_cv"])
    elif spec.id == "parallelism":
        if "output_tok_s_per_device" in frames["file"].columns:  # a plan report, not measured points
            out = judge_plan(frames["file"], reg, pool, params["mfu_target"])
        else:
            out = gates.parallelism(frames["file"], params["mfu_target"])
    elif spec.id == "multimodal":
        out = gates.multimodal(frames["file"], params["max_error_rate"])
    elif spec.id == "regression":
        out = gates.regression(frames["baseline"], frames["candidate"], params["tolerance"],
                               check.steps if check else ())
    else:
        # this pool alone: resolving the whole registry for each pool's item made the tracker quadratic
        specs = pools_by_id(dataclasses.replace(reg, pools=(pool,)), Candidate(name="onboarding"))
        if pool.id not in specs:
            return Outcome(PENDING, "the pool has no serving config to benchmark")
        out, _ = gates.benchmark(frames["file"], specs[pool.id], params["tolerance"])
    return Outcome(out.status, out.reason, at)
