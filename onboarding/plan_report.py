"""A `hetpool plan --json` report as evidence of the parallelism item: "a plan meets the MFU target".

Stored with `hetpool onboarding add-evidence POOL parallelism plan.json` (or named in the registry as
`checks: {parallelism: {file: plan.json}}`) in place of the measured devices,mfu table. The item passes when the
report has a layout of the pool that fits and meets the report's latency targets with an MFU at or above the
item's target. A plan's MFU counts the model FLOPs of its output tokens per device over the chip's peak
(2 x active params per token; prompts are not counted, so it is a lower bound), from the report's
output_tok_s_per_device and the registry's model and chip.
"""

from __future__ import annotations

import json

import polars as pl

from onboarding.exceptions import EvidenceError
from onboarding.gates import FAIL, PASS, Outcome
from pool_registry import Pool, Registry

FLOPS_PER_PARAM = 2.0
SCHEMA = {"model": pl.String, "pool": pl.String, "tp": pl.Int64, "pp": pl.Int64, "ep": pl.Int64,
          "devices_per_replica": pl.Int64, "concurrency": pl.Int64, "fits": pl.Boolean, "meets_targets": pl.Boolean,
          "output_tok_s_per_device": pl.Float64}
_WHOLE = ("tp", "pp", "ep", "devices_per_replica", "concurrency")


def looks_like_plan(text: str) -> bool:
    """True when the text is a JSON object (a plan report) rather than the devices,mfu CSV."""
    return text.lstrip("\ufeff \t\r\n").startswith("{")


def parse_plan_report(text: str, source: str = "<plan report>") -> pl.DataFrame:
    """The report's plans as a frame of SCHEMA, or an EvidenceError naming what is wrong."""
    try:
        report = json.loads(text)
    except json.JSONDecodeError as exc:
        raise EvidenceError(source, exc.lineno, exc.colno, f"not JSON: {exc.msg}") from None
    plans = report.get("plans") if isinstance(report, dict) else None
    model = report.get("model") if isinstance(report, dict) else None
    if not isinstance(model, str) or not isinstance(plans, list):
        raise EvidenceError(source, None, None, "expected the JSON object 'hetpool plan --json' prints, with "
                                                "'model' and 'plans'")
    rows = []
    for i, p in enumerate(plans):
        if not isinstance(p, dict) or not isinstance(p.get("pool"), str) or \
                not all(isinstance(p.get(k), int) and not isinstance(p.get(k), bool) for k in _WHOLE) or \
                not all(isinstance(p.get(k), bool) for k in ("fits", "meets_targets")):
            raise EvidenceError(source, None, None, f"plans[{i}]: expected pool, whole numbers {', '.join(_WHOLE)} "
                                                    "and true/false fits and meets_targets")
        speed = p.get("output_tok_s_per_device")
        if speed is not None and (isinstance(speed, bool) or not isinstance(speed, int | float) or speed < 0):
            raise EvidenceError(source, None, None, f"plans[{i}].output_tok_s_per_device: expected a number >= 0 "
                                                    f"or null, got {speed!r}")
        rows.append({"model": model, **{k: p.get(k) for k in SCHEMA if k != "model"}})
    return pl.DataFrame(rows, schema=SCHEMA)


def judge_plan(frame: pl.DataFrame, reg: Registry, pool: Pool, mfu_target: float) -> Outcome:
    """PASS when a layout of the pool fits, meets its targets and reaches the MFU target."""
    if frame.is_empty():
        return Outcome(FAIL, "the plan report has no plan")
    model_id = str(frame["model"][0])
    try:
        model = reg.model(model_id)
    except LookupError as exc:
        return Outcome(FAIL, f"the plan report's model: {exc}")
    peak = reg.chip_of(pool).compute_peak(model.compute_format)[0] * 1e12
    ok = frame.filter((pl.col("pool") == pool.id) & pl.col("fits") & pl.col("meets_targets")
                      & pl.col("output_tok_s_per_device").is_not_null())
    if ok.is_empty():
        return Outcome(FAIL, f"the plan of {model_id} has no layout of {pool.id} that fits and meets its targets")
    ok = ok.with_columns(mfu=pl.col("output_tok_s_per_device") * FLOPS_PER_PARAM * model.active_params_b * 1e9 / peak)
    best = ok.sort("mfu", descending=True).row(0, named=True)
    where = (f"tp{best['tp']} pp{best['pp']}{' ep' + str(best['ep']) if best['ep'] > 1 else ''} at concurrency "
             f"{best['concurrency']}")
    text = (f"plan of {model_id}: {where} fits and meets its targets with MFU {best['mfu']:.3f} (output tokens' "
            f"FLOPs per device), target {mfu_target:g}")
    return Outcome(PASS if best["mfu"] >= mfu_target else FAIL, text)
