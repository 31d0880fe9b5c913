"""Evidence gates: each a pure function of parsed evidence (and bounds) to a pass/fail outcome with its reason."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from replay.bench import closed_loop, default_requests
from replay.exceptions import ReplayError
from replay.fleet import PoolSpec

PASS, FAIL, PENDING = "pass", "fail", "pending"
QUARTILES = (0.25, 0.5, 0.75, 1.0)


@dataclass(frozen=True)
class Outcome:
    """A gate's verdict, why, and when the evidence for it was produced (epoch ms, when known)."""

    status: str
    reason: str
    at_ms: int | None = None


def operators(frame: pl.DataFrame) -> Outcome:
    """Every operator's max_abs_err within its tol."""
    bad = frame.filter(pl.col("max_abs_err") > pl.col("tol"))
    if bad.height:
        listed = ", ".join(f"{r['op']} {r['max_abs_err']:g} > {r['tol']:g} (line {r['line']})"
                           for r in bad.iter_rows(named=True))
        return Outcome(FAIL, f"{bad.height} of {frame.height} operators out of tolerance: {listed}")
    share = frame.with_columns(r=pl.when(pl.col("tol") > 0).then(pl.col("max_abs_err") / pl.col("tol")).otherwise(0))
    worst = share.sort("r", descending=True).row(0, named=True)
    return Outcome(PASS, f"{frame.height} operators within tolerance (closest: {worst['op']} "
                         f"{worst['max_abs_err']:g} of {worst['tol']:g})")


def precision(frame: pl.DataFrame, max_grad_norm_cv: float) -> Outcome:
    """No NaN or Inf in any metric, and the gradient norm's spread (std / mean) under the bound."""
    for col in frame.columns:
        if col in ("line", "step") or not frame[col].dtype.is_float():
            continue
        bad = frame.filter(~pl.col(col).is_finite())
        if bad.height:
            r = bad.row(0, named=True)
            return Outcome(FAIL, f"{col} is {r[col]} at step {r['step']} (line {r['line']}); "
                                 f"{bad.height} non-finite value(s) in {col}")
    norms = frame["grad_norm"].to_numpy()
    mean = float(np.mean(norms))
    cv = float(np.std(norms)) / mean if mean > 0 else float("inf")
    text = f"gradient-norm spread (std/mean) {cv:.3f} over {frame.height} steps, bound {max_grad_norm_cv:g}"
    return Outcome(PASS if cv < max_grad_norm_cv else FAIL, f"no NaN/Inf; {text}")


def parallelism(frame: pl.DataFrame, mfu_target: float) -> Outcome:
    """Measured MFU at or above the target at every scale-out point."""
    points = ", ".join(f"{r['mfu']:.3f} on {r['devices']} devices" for r in frame.iter_rows(named=True))
    low = frame.filter(pl.col("mfu") < mfu_target)
    if low.height:
        return Outcome(FAIL, f"MFU below the target {mfu_target:g}: " + ", ".join(
            f"{r['mfu']:.3f} on {r['devices']} devices (line {r['line']})" for r in low.iter_rows(named=True)))
    return Outcome(PASS, f"MFU {points}; target {mfu_target:g}")


def key_steps(baseline: pl.DataFrame, candidate: pl.DataFrame) -> tuple[int, ...]:
    """The default key steps: the common steps nearest a quarter, half, three quarters and all of the run."""
    common = np.array(sorted(set(baseline["step"].to_list()) & set(candidate["step"].to_list())))
    if not common.size:
        return ()
    return tuple(dict.fromkeys(int(common[np.abs(common - q * common[-1]).argmin()]) for q in QUARTILES))


def deviations(baseline: pl.DataFrame, candidate: pl.DataFrame, steps: tuple[int, ...]) -> pl.DataFrame:
    """step, baseline, candidate and relative deviation |candidate - baseline| / baseline at the key steps."""
    joined = baseline.select("step", pl.col("loss").alias("baseline")).join(
        candidate.select("step", pl.col("loss").alias("candidate")), on="step")
    return joined.filter(pl.col("step").is_in(list(steps))).sort("step").with_columns(
        deviation=(pl.col("candidate") - pl.col("baseline")).abs() / pl.col("baseline").abs())


def regression(baseline: pl.DataFrame, candidate: pl.DataFrame, tolerance: float,
               steps: tuple[int, ...] = ()) -> Outcome:
    """The candidate's loss within `tolerance` (relative) of the baseline's at every key step."""
    steps = steps or key_steps(baseline, candidate)
    if not steps:
        return Outcome(FAIL, "the baseline and candidate curves share no step")
    for name, curve in (("baseline", baseline), ("candidate", candidate)):
        missing = sorted(set(steps) - set(curve["step"].to_list()))
        if missing:
            return Outcome(FAIL, f"key step {missing[0]} is not in the {name} curve")
    dev = deviations(baseline, candidate, steps)
    over = dev.filter(pl.col("deviation") > tolerance)
    at = ", ".join(f"step {r['step']} {r['deviation']:.1%}" for r in dev.iter_rows(named=True))
    if over.height:
        return Outcome(FAIL, f"loss deviates more than {tolerance:.1%} at {over.height} of {dev.height} key "
                             f"steps: {at}")
    return Outcome(PASS, f"loss within {tolerance:.1%} at every key step: {at}")


def benchmark(table: pl.DataFrame, spec: PoolSpec, tolerance: float) -> tuple[Outcome, pl.DataFrame]:
    """Each of the pool's benchmark rows against the replica model's closed-loop run at the same point.

    The error of a row is the larger relative error of its TTFT and TPOT against the model's medians.
    """
    rows = table.filter(pl.col("pool") == spec.id)
    if rows.is_empty():
        return Outcome(FAIL, f"the table has no row for pool {spec.id}"), pl.DataFrame()
    out = []
    for r in rows.iter_rows(named=True):
        try:
            point = closed_loop(spec, r["concurrency"], r["isl"], r["osl"], default_requests(r["concurrency"]))
        except ReplayError as exc:
            return Outcome(FAIL, f"line {r['line']}: {exc}"), pl.DataFrame()
        tpot = point.tpot_ms_p50 or 0.0
        err = max(abs(r["ttft_ms"] - point.ttft_ms_p50) / point.ttft_ms_p50,
                  abs(r["tpot_ms"] - tpot) / tpot if tpot else 0.0)
        out.append({"line": r["line"], "isl": r["isl"], "osl": r["osl"], "concurrency": r["concurrency"],
                    "ttft_ms": r["ttft_ms"], "model_ttft_ms": point.ttft_ms_p50, "tpot_ms": r["tpot_ms"],
                    "model_tpot_ms": tpot, "error": err})
    compared = pl.DataFrame(out)
    worst = compared.sort("error", descending=True).row(0, named=True)
    text = (f"{compared.height} row(s); worst at concurrency {worst['concurrency']} (line {worst['line']}): TTFT "
            f"{worst['ttft_ms']:g} ms against the model's {worst['model_ttft_ms']:.1f}, TPOT {worst['tpot_ms']:g} "
            f"against {worst['model_tpot_ms']:.1f}, off by {worst['error']:.0%} (tolerance {tolerance:.0%})")
    return Outcome(PASS if worst["error"] <= tolerance else FAIL, text), compared


def multimodal(frame: pl.DataFrame, max_error_rate: float) -> Outcome:
    """A vision-language model's service answered both text and image requests, each modality's errors at most
    max_error_rate of its requests."""
    rows = {r["modality"]: r for r in frame.iter_rows(named=True)}
    said = "; ".join(f"{m}: {r['requests']:,} requests, {r['errors']:,} errors, p50 TTFT {r['ttft_p50_ms']:g} ms"
                     for m, r in rows.items())
    for m in ("text", "image"):
        r = rows.get(m)
        if r is None or r["requests"] - r["errors"] < 1:
            why = "no row" if r is None else "no request answered"
            return Outcome(FAIL, f"no {m} request served ({why}); the bring-up serves both text and images"
                                 + (f" ({said})" if said else ""))
        if r["errors"] > max_error_rate * r["requests"]:
            return Outcome(FAIL, f"{m} requests failed {r['errors'] / r['requests']:.1%} (line {r['line']}), above "
                                 f"max_error_rate {max_error_rate:g}; {said}")
    return Outcome(PASS, said)
