"""The fit of one chip and engine's pools: bounded least squares over every pool's evidence (replay.fitting),
started from a search of the two passes and the step overhead, and each pool's record at the result."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from scipy.optimize import minimize

from replay.assumptions import assumptions
from replay.bands import bands, spread_of
from replay.calibrate.evidence import MISS, Bench, Evidence, Trace
from replay.calibrate.notes import kv_note, statistic_note, typical_note, unexplained_note, unphysical_note
from replay.calibrate.record import EXPLAINS, PHYSICAL_MIN, BenchCheck, PoolFit, errors
from replay.calibrate.start import hops_us, start_values, undeclared_hop
from replay.costmodel import step_model
from replay.fitting import Coefficient, apply, fit
from replay.fleet import PoolSpec

EVALUATIONS = 240      # model runs per fit at most
OVERHEAD_SCAN_MS = (0.0, 1.0, 2.0, 3.0, 4.5, 6.0, 8.0, 11.0, 15.0, 20.0, 30.0, 45.0)


def fit_group(specs: list[PoolSpec], evidence: dict[str, Evidence]) -> list[PoolFit]:
    """Fit one set of coefficients to the pools of one chip and engine, from every pool's evidence."""
    parts = [(spec, part) for spec in specs for part in evidence[spec.id] if part is not None]
    if not parts:
        return [PoolFit(s.id, 0, 0, 0, None, None, None, None, None, None, None,
                        ("no usable observations (need obs_ttft_s on requests that completed, or benchmark rows)",))
                for s in specs]

    def residuals(values: dict[str, float | None]) -> np.ndarray:
        return np.concatenate([part.residuals(apply(spec, values)) for spec, part in parts])

    p = start_values(specs[0])
    typical = undeclared_hop(specs[0])
    prompts = np.concatenate([part.prompts for _, part in parts])
    prompt = max(1.0, float(np.median(prompts))) if prompts.size else 1.0
    core = _core(specs[0], p, residuals, prompt)
    smooth = all(isinstance(part, Bench) for _, part in parts)
    # a hop's latency adds hops x latency to every pass, as the engine's time per step adds itself: evidence from
    # one layout (one hop count) cannot tell the two apart, however many rows it has
    hops = {round(hops_us(spec), 6) for spec, _ in parts}
    one_layout = len(hops) == 1 and min(hops) > 0
    values, report = fit(residuals, p, max_evaluations=EVALUATIONS * 4 if smooth else EVALUATIONS // 2, starts=[core],
                         smooth=smooth, collinear=("collective_us",) if one_layout else ())
    notes = [f"fitted {c.name} reached the bound {c.value:g}: the evidence is faster than the chip's peak"
             for c in report if c.status == "at bound" and c.name in ("mfu", "mem_bw_eff", "mfu_decode")]
    if typical is not None and any(c.name == "collective_us" and c.status != "fitted" for c in report):
        notes.append(typical_note(specs[0], typical))
    group = tuple(s.id for s in specs)
    out = []
    for spec in specs:
        best = apply(spec, values)
        mine = [part for part in evidence[spec.id] if part is not None]
        trace = next((p for p in mine if isinstance(p, Trace)), None)
        table = next((p for p in mine if isinstance(p, Bench)), None)
        if not mine:
            out.append(fit_record(spec, best, report, group, (), notes, None, None, carried=None))
            continue
        out.append(fit_record(spec, best, report, group, mine, notes, trace, table, carried=None))
    return out


def fit_record(spec: PoolSpec, best: PoolSpec, report: list[Coefficient], group: tuple[str, ...],
               parts: list[Trace | Bench] | tuple[()], notes: list[str], trace: Trace | None, table: Bench | None,
               carried: str | None) -> PoolFit:
    """One pool's fit record at the group's coefficients: its in-sample errors, whether the model explains its
    rows (naming the worst when not), and which coefficients lie outside what silicon sustains."""
    models = [p.model(best) for p in parts]
    ttft_mape = ttft_r2 = tpot_mape = tpot_r2 = ttft_md = tpot_md = None
    explains: bool | None = None
    checks: tuple[BenchCheck, ...] = ()
    compared = [p.compared(*m) for p, m in zip(parts, models, strict=True)]
    if models:
        ttft_mape, ttft_r2, _ = errors(np.concatenate([m[0] for m in models]),
                                       np.concatenate([p.obs_ttft for p in parts]))
        tpot_mape, tpot_r2, _ = errors(np.concatenate([m[1] for m in models]),
                                       np.concatenate([p.obs_tpot for p in parts]))
        # the median over what the fit compares: benchmark rows, and a trace's groups of similar requests
        ttft_md, tpot_md = (errors(np.concatenate([c[kind][0] for c in compared]),
                                   np.concatenate([c[kind][1] for c in compared]))[2] for kind in ("TTFT", "TPOT"))
        explains = all(md is None or md <= EXPLAINS[k] for k, md in (("TTFT", ttft_md), ("TPOT", tpot_md)))
    if table is not None:
        notes = [*notes, *kv_note(spec, table.rows), *statistic_note(best, table)]
        model_ttft, model_tpot = models[parts.index(table)]
        n = len(table.rows)
        spread = spread_of(report)
        band = bands(best, spread, lambda s: [float(v) * 1000 for v in np.concatenate(table.model(s))]) \
            if spread and carried is None else [None] * (2 * n)
        checks = tuple(BenchCheck(spec.id, isl, osl, c, float(t * 1000), float(mt * 1000), float(p * 1000),
                                  float(mp * 1000), *_ends(band[k]), *_ends(band[n + k]), table.replayed(k))
                       for k, ((isl, osl, c), t, mt, p, mp) in enumerate(zip(
                           table.rows, table.obs_ttft, model_ttft, table.obs_tpot, model_tpot, strict=True)))
    unphysical = tuple(k for k, least in PHYSICAL_MIN.items()
                       if carried is None and models and (v := getattr(best, k)) is not None and v < least)
    if explains is False:
        worst = worst_rows(compared)
        notes = [*notes, unexplained_note(spec.id, ttft_md, tpot_md, worst)]
    notes += [unphysical_note(k, getattr(best, k)) for k in unphysical]
    notes = [*notes, *(n for n in assumptions(best) if n not in notes)]
    return PoolFit(pool=spec.id, n_ttft=int(trace.ttft_at.size) if trace else 0,
                   n_tpot=int(trace.tpot_at.size) if trace else 0, n_bench=len(table.rows) if table else 0,
                   mfu=best.mfu, mem_bw_eff=best.mem_bw_eff, step_overhead_ms=best.step_overhead_ms,
                   ttft_mape=ttft_mape, ttft_r2=ttft_r2, tpot_mape=tpot_mape, tpot_r2=tpot_r2, notes=tuple(notes),
                   seq_overhead_us=best.seq_overhead_us, chunk_overhead_us=best.chunk_overhead_us,
                   collective_us=best.collective_us,
                   mfu_decode=best.mfu_decode, serial_share=best.serial_share, coefficients=tuple(report),
                   group=group, checks=checks, carried_from=carried, ttft_mdape=ttft_md, tpot_mdape=tpot_md,
                   explains=explains, unphysical=unphysical)


def worst_rows(compared: list[dict[str, tuple[np.ndarray, np.ndarray, list[str]]]],
               count: int = 3) -> list[tuple[float, str]]:
    """The `count` rows (or groups) the model misses most, as (log miss, the row and how far off it is)."""
    rows: list[tuple[float, str]] = []
    for part in compared:
        for kind, (model, observed, labels) in part.items():
            with np.errstate(divide="ignore", invalid="ignore"):
                miss = np.abs(np.log(model / observed))
            miss = np.where(np.isfinite(miss), miss, np.inf)
            rows += [(float(miss[i]), f"{labels[i]}: {kind} {_ms(model[i])} modelled, {_ms(observed[i])} measured "
                                      f"({_change(model[i], observed[i])})") for i in np.argsort(-miss)[:count]]
    return sorted(rows, key=lambda r: -r[0])[:count]


def _ms(seconds: float) -> str:
    return "none" if not np.isfinite(seconds) else f"{seconds * 1000:.3g} ms"


def _change(model: float, observed: float) -> str:
    return "not served" if not np.isfinite(model) else f"{(model / observed - 1) * 100:+.0f} %"


def _core(spec: PoolSpec, p: dict[str, float | None], residuals: Callable[[dict[str, float | None]], np.ndarray],
          prompt: float) -> dict[str, float | None]:
    """mfu, mem_bw_eff and step overhead, the start of the full fit, the others held at the registry's values.

    Searched as x = (log of a typical prompt's prefill pass, log of a lone decode pass, overhead in 10 ms), both
    passes including the overhead: the evidence pins those two passes down tightly, while the overhead's share
    of them shows only in how times change with prompt length and batch. In mfu, mem_bw_eff and overhead the
    same trade-off is a long, narrow, diagonal valley with a rough floor (events reorder), where searches stall;
    here it lies along one axis. The two passes first, then the overhead by a scan along the valley, then all
    three together.
    """
    step = step_model(apply(spec, {**p, "mfu": 1.0, "mem_bw_eff": 1.0, "mfu_decode": None,
                                     "step_overhead_ms": 0.0}))
    unit_prefill, unit_decode = prompt * step.s_per_token, step.weight_bytes_read(1.0) * step.s_per_byte
    held = {**p, "mfu_decode": p.get("mfu_decode")}

    def values(x: np.ndarray) -> dict[str, float | None] | None:
        o = max(0.0, 10.0 * x[2]) / 1000.0
        prefill, decode = np.exp(x[0]) - o, np.exp(x[1]) - o
        if prefill <= 0 or decode <= 0:
            return None
        mfu, eff = unit_prefill / prefill, unit_decode / decode
        if not (0.0 < mfu <= 1.0 and 0.0 < eff <= 1.0):
            return None
        return {**held, "mfu": float(mfu), "mem_bw_eff": float(eff), "step_overhead_ms": o * 1000.0}

    def cost(x: np.ndarray) -> float:
        v = values(x)
        if v is None:
            return float("inf")
        r = residuals(v)
        r = np.where(np.isfinite(r), r, MISS)
        return float(r @ r)

    mfu0, eff0, o0 = float(p["mfu"] or 0.4), float(p["mem_bw_eff"] or 0.6), float(p["step_overhead_ms"] or 0.0)
    x0 = np.array([np.log(unit_prefill / mfu0 + o0 / 1000), np.log(unit_decode / eff0 + o0 / 1000), o0 / 10.0])
    passes = minimize(lambda y: cost(np.array([y[0], y[1], x0[2]])), x0[:2], method="Nelder-Mead", options={
        "initial_simplex": x0[:2] + np.array([[0, 0], [0.2, 0], [0, 0.2]]), "xatol": 2e-3,
        "fatol": 1e-12, "maxfev": EVALUATIONS // 6})
    scan = [np.array([*passes.x, o / 10.0]) for o in OVERHEAD_SCAN_MS]
    start = min(scan, key=cost)
    found = minimize(cost, start, method="Nelder-Mead", options={
        "initial_simplex": start + np.array([[0, 0, 0], [0.05, 0, 0], [0, 0.05, 0], [0, 0, 0.1]]),
        "xatol": 1e-3, "fatol": 1e-12, "maxfev": EVALUATIONS // 2})
    return values(found.x) or dict(held)


def _ends(band: tuple[float, float] | None) -> tuple[float | None, float | None]:
    """A band's low and high ends, or none when the fit gave no band."""
    return band or (None, None)
