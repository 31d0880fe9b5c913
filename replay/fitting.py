"""The coefficients calibration fits, and a bounded least-squares fit in log space that says which the data pin down.

Every coefficient is positive and searched as its logarithm between physical bounds, so a fit weighs a factor of
two the same at 0.1 as at 0.8, and residuals are logs of model over measured times (percentage errors). The fit
starts from several points (the registry's values, and spread-out ones) and keeps the best. At the optimum the
Jacobian J of the residuals says how well each coefficient is determined: with the others re-fitted, moving
log(coefficient j) by d raises the sum of squares by d^2 / [(J^T J)^-1]_jj (to first order), so its standard
error, as a factor, is

    spread_j = exp(sqrt(s^2 x [(J^T J)^-1]_jj)),   s^2 = max(RSS / (n - p), (0.3 %)^2)

(the residuals' own scatter, never taken below 0.3 %: no model of a server is better than that). A coefficient
with a spread above SPREAD_LIMIT is not identifiable from this evidence (another coefficient can take its part
as well): it is kept at the registry's value and the others are fitted again without it, rather than left
wherever the search stopped. An overhead at its lower bound, or one the fit explains the evidence as well
without (the others unchanged), is one the evidence shows none of; it is reported as 0. A nested coefficient
(NESTED: one that refines the model, the serial share of memory and compute or the decode's own share of peak)
is fitted both ways and kept only when the fit without it is significantly worse; otherwise the simpler fit
stands, and the coefficient is reported as asked for by none of the evidence (the fit with it went to its bound)
or not identifiable. A LATE coefficient (the engine's time per prompt chunk) is taken on after all the others,
from where their fit ended, and kept only when the fit with it is significantly better.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import least_squares, minimize

from replay.fleet import PoolSpec

# name -> (lower, upper, value a search starts from when the registry has none)
BOUNDS: dict[str, tuple[float, float, float]] = {
    "mfu": (0.005, 1.0, 0.4),
    "mem_bw_eff": (0.01, 1.0, 0.6),
    "mfu_decode": (0.005, 1.0, 0.4),
    "step_overhead_ms": (1e-3, 500.0, 0.5),
    "seq_overhead_us": (1e-2, 1e5, 1.0),
    "chunk_overhead_us": (1e-2, 1e6, 100.0),
    "collective_us": (1e-2, 1e4, 0.5),
    "serial_share": (1e-3, 1.0, 0.3),
}
NAMES = tuple(BOUNDS)
# the coefficients whose 0 means "no such time" (searched from a typical size, and 0 when the fit can do without)
OVERHEADS = ("step_overhead_ms", "seq_overhead_us", "chunk_overhead_us", "collective_us", "serial_share")
SPREAD_LIMIT = 1.5    # a coefficient whose standard error is a factor above this is not identifiable
F_CRITICAL = 4.0      # dropping a coefficient that raises the squared error by more than this many variances hurts
MAX_MOVE = 0.7       # the longest first step of the search in log space (a factor 2)
STEP = 0.05          # the Jacobian's step in log space: wider than the model's small steps
ROUGH = 0.25          # a row whose slope changes by more than this share with the difference step is not smooth
MISS = 5.0            # the residual of a time the trial model could not produce
FLOOR = 0.003         # residuals are not trusted below 0.3 %: a model of a server is not better than that
# sizes that show an effect
TYPICAL = {"step_overhead_ms": 2.0, "seq_overhead_us": 20.0, "chunk_overhead_us": 500.0, "collective_us": 5.0,
           "serial_share": 0.3}
EFFECT = 1e-4         # a coefficient whose 10 % change moves no residual by this much has no effect here
# A coefficient that only refines the model is taken on when the evidence needs it: fitted with and without it,
# it is kept only if the fit without it is significantly worse (the F test of a nested model), so that evidence
# the simpler model explains gives the simpler model's coefficients: a pass without a serial share, and decode
# at the prefill's share of peak (what a registry without mfu_decode means). Needed together, each one is then
# kept only if the fit without it is worse.
NESTED = ("serial_share", "mfu_decode")
# A coefficient a fit takes on last: the others are fitted without it first, then it joins the ones that fit
# found, searched from there, and it is kept only when that explains the evidence significantly better. The
# engine's time per prompt chunk adds to every pass that carries a chunk, so on evidence that shows none of it
# the search trades it against the time per step and the bandwidth; searched among them from the start, it
# spends the budget that separates those two (planted coefficients were missed by 13 to 35 %).
LATE = ("chunk_overhead_us",)
# Which of several loose coefficients the registry's value replaces first: the ones it knows best. A link's hop
# latency is a datasheet figure, and a fit on one TP degree cannot tell it from the engine's time per step; the
# roofline's full overlap is what a registry without a serial share means, and one TP degree cannot tell that
# share from a time per running sequence.
DROP_ORDER = ("serial_share", "collective_us", "mfu_decode", "chunk_overhead_us", "seq_overhead_us", "step_overhead_ms",
              "mem_bw_eff", "mfu")
STATUSES = ("fitted", "not identifiable", "at bound", "no effect", "registry")


@dataclass(frozen=True)
class Coefficient:
    """One coefficient of a fit: its value, how it was found, and how well the evidence determines it."""

    name: str
    value: float | None
    status: str              # one of STATUSES
    spread: float | None     # the value is known within x / spread .. x * spread; None when not fitted
    prior: float | None      # the registry's value

    def error(self) -> str:
        """The standard error as printed: ± a percentage, or the factor it spans once that passes ten."""
        if self.spread is None or self.status != "fitted":
            return "–"
        return f"±{(self.spread - 1) * 100:.1f} %" if self.spread <= 10.0 else "more than a factor of 10"

    def describe(self) -> str:
        """One phrase: value and status."""
        if self.value is None:
            return f"{self.name}: as mfu ({'not identifiable' if self.status != 'fitted' else self.status})"
        text = f"{self.name} {self.value:.4g}"
        if self.status == "fitted" and self.spread is not None and self.spread > SPREAD_LIMIT:
            # kept because the fit is significantly worse without it, though the evidence leaves its value open
            return f"{text} (fitted loosely, {self.error()}: the fit is worse without it, but it is not pinned down)"
        if self.status == "fitted" and self.spread is not None:
            return f"{text} (fitted, {self.error()})"
        if self.status == "not identifiable":
            return f"{text} (not identifiable from this evidence: the registry's value is kept)"
        if self.status == "no effect":
            return f"{text} (not identifiable: it has no effect on this evidence; the registry's value is kept)"
        if self.status == "at bound":
            return f"{text} (at its bound: the evidence asks for {'none' if self.value == 0 else 'beyond it'})"
        return f"{text} ({self.status})"


def prior(spec: PoolSpec) -> dict[str, float | None]:
    """The registry's (or candidate's) value of every coefficient; None where it declares none."""
    link = spec.chip.interconnect.latency_us
    return {"mfu": spec.mfu, "mem_bw_eff": spec.mem_bw_eff, "mfu_decode": spec.mfu_decode,
            "step_overhead_ms": spec.step_overhead_ms, "seq_overhead_us": spec.seq_overhead_us,
            "chunk_overhead_us": spec.chunk_overhead_us,
            "collective_us": spec.collective_us if spec.collective_us is not None else link,
            "serial_share": spec.serial_share}


def apply(spec: PoolSpec, values: Mapping[str, float | None]) -> PoolSpec:
    """The pool with these coefficients (mfu_decode None: as mfu)."""
    return dataclasses.replace(spec, **values)  # type: ignore[arg-type]


def _start(p: dict[str, float | None], name: str) -> float:
    low, high, default = BOUNDS[name]
    value = p.get(name)
    if name == "mfu_decode" and value is None:
        value = p.get("mfu")
    if not value or value <= low:
        value = default
    return min(max(value, low * 1.01), high / 1.01)


def fit(residuals: Callable[[dict[str, float | None]], np.ndarray], p: dict[str, float | None],
        names: tuple[str, ...] = NAMES, max_evaluations: int = 400,
        starts: Sequence[Mapping[str, float | None]] = (), judge: bool = True, smooth: bool = False,
        collinear: Sequence[str] = (), late: bool = True) -> tuple[dict[str, float | None], list[Coefficient]]:
    """Fit `names` by least squares on residuals(values), the others held at their prior; report each one.

    `starts` are more points to start from (the best of them and the registry's values is taken); without
    `judge` the fit stops there, every coefficient it moved reported as fitted. `smooth` residuals are searched
    by Gauss-Newton steps, rough ones (replayed traces) by Nelder-Mead. `collinear` names coefficients that the
    evidence's structure cannot tell from another (the caller knows why): searched with the others, then put back
    at the prior and the rest fitted again, reported not identifiable. In the values, mfu_decode None means
    "as mfu" (the registry's default when it declares none). With `late` (and `judge`), the LATE coefficients
    are taken on after the others (see LATE)."""
    if late and judge and any(n in LATE for n in names):
        return _fit_late(residuals, p, names, max_evaluations, starts, smooth, collinear)
    held: dict[str, float | None] = {n: (v if v is not None or n == "mfu_decode" else 0.0) for n, v in p.items()}
    base = {n: _start(p, n) for n in names}
    if starts:
        def cost(point: Mapping[str, float | None]) -> float:
            r = residuals({**held, **point})
            r = np.where(np.isfinite(r), r, 1e3)
            return float(r @ r)
        options = [base, *({**base, **{n: _clip(n, v) for n, v in s.items() if n in names and v}} for s in starts)]
        base = min(options, key=cost)

    def compose(free: tuple[str, ...], y: np.ndarray | list[float], at: dict[str, float | None],
                ) -> dict[str, float | None]:
        return {**held, **at, **{n: float(math.exp(v)) for n, v in zip(free, y, strict=True)}}

    def run(free: tuple[str, ...], at: dict[str, float | None], budget: int,
            ) -> tuple[dict[str, float | None], np.ndarray, np.ndarray]:
        if not free:
            return at, residuals({**held, **at}), np.zeros((0, 0))
        lo = np.log([BOUNDS[n][0] for n in free]) + 1e-9
        hi = np.log([BOUNDS[n][1] for n in free]) - 1e-9
        start = np.clip(np.log([float(at[n] or base[n]) for n in free]), lo, hi)

        def f(y: np.ndarray) -> np.ndarray:
            r = residuals(compose(free, np.clip(y, lo, hi), at))
            return np.where(np.isfinite(r), r, MISS)

        def sse(y: np.ndarray) -> float:
            r = f(y)
            return float(r @ r)

        best_y, best_cost = start, sse(start)
        if smooth:  # closed-loop medians move smoothly with the coefficients: Gauss-Newton from several starts
            for k, scale in enumerate((0.0, math.log(2.0), -math.log(2.0))):
                # the spread-out starts, only for a fit worse than the model's own 1 %, move efficiencies one
                # way and overheads the other
                if k and (budget <= 0 or best_cost < FLOOR**2 * best_y.size):
                    break
                y0 = np.clip(start + np.array([-scale if n in OVERHEADS else scale for n in free]), lo, hi)
                res = least_squares(f, y0, bounds=(lo, hi), method="trf", diff_step=3e-2, x_scale=1.0,
                                    ftol=1e-9, xtol=1e-9,
                                    max_nfev=max(5, (budget if k == 0 else budget // 2) // (len(free) + 1)))
                budget -= res.nfev * (len(free) + 1)
                if 2.0 * res.cost < best_cost:
                    best_y, best_cost = res.x, 2.0 * float(res.cost)
            return compose(free, best_y, at), f(best_y), _smooth_rows(f, best_y, lo, hi)
        # Nelder-Mead: replayed traces' times move in small steps as events reorder, a floor too rough for
        # gradients from finite differences; then a Gauss-Newton polish from where it stopped
        for k, scale in enumerate((0.0, 0.0, math.log(2.0), -math.log(2.0))):
            if k and (budget <= 0 or best_cost < 1e-10):
                break
            # restarts from the best point so far with a fresh basis follow a curving valley; the spread-out
            # starts move efficiencies one way and overheads the other
            origin = best_y if scale == 0.0 else start
            y0 = np.clip(origin + np.array([-scale if n in OVERHEADS else scale for n in free]), lo, hi)
            # searched in coordinates where the residuals respond alike in every direction (the Jacobian's
            # singular vectors, scaled): a narrow diagonal valley becomes a round bowl
            basis = _whitening(_jacobian(f, y0, lo, hi))
            budget -= 2 * len(free)

            def g(z: np.ndarray, y0: np.ndarray = y0, basis: np.ndarray = basis) -> float:
                return sse(y0 + basis @ z)

            res = minimize(g, np.zeros(len(free)), method="Nelder-Mead", options={
                "initial_simplex": np.vstack([np.zeros(len(free)), 0.02 * np.eye(len(free))]), "xatol": 1e-4,
                "fatol": 1e-12, "maxfev": max(10, budget // 2)})
            budget -= res.nfev
            if res.fun < best_cost:
                best_y, best_cost = np.clip(y0 + basis @ res.x, lo, hi), float(res.fun)
        polish = least_squares(f, best_y, bounds=(lo, hi), method="trf", diff_step=2e-2, max_nfev=3)
        if 2.0 * polish.cost < best_cost:
            best_y = polish.x
        return compose(free, best_y, at), f(best_y), _smooth_rows(f, best_y, lo, hi)

    # only what moves the residuals is searched for
    start_values: dict[str, float | None] = dict(base)
    r0 = residuals({**held, **start_values})
    free = tuple(n for n in names if np.nanmax(np.abs(residuals({**held, **start_values, n: _bumped(n, base[n])})
                                                       - r0), initial=0.0) > EFFECT)
    current: dict[str, float | None] = {n: (start_values[n] if n in free else held.get(n)) for n in names}
    not_identifiable: list[str] = []
    needed: set[str] = set()  # loosely determined, but the fit is worse without them
    budget = max_evaluations
    unneeded: set[str] = set()  # nested coefficients the evidence does not need: none asked for
    undecided: set[str] = set()  # nested ones the fit could use as well as not: not identifiable
    nested = tuple(n for n in free if n in NESTED)
    if nested and judge:
        simple = tuple(n for n in free if n not in nested)
        values, r, jac = run(simple, {**current, **{n: held.get(n) for n in nested}}, budget)
        values2, r2, jac2 = run(free, current, budget)
        if _worse(r, r2, len(free)):
            values, r, jac = values2, r2, jac2
            # the refinements together are needed; each one stays only if the fit without it is worse
            for n in nested if len(nested) > 1 else ():
                rest = tuple(m for m in free if m != n)
                values3, r3, jac3 = run(rest, {**values, n: held.get(n)}, budget // 2)
                if not _worse(r3, r, len(free)):
                    _judge_nested(n, values2, unneeded, undecided)
                    free, values, r, jac = rest, values3, r3, jac3
        else:
            free = simple
            for n in nested:
                _judge_nested(n, values2, unneeded, undecided)
    else:
        values, r, jac = run(free, current, budget)
    current = {n: values[n] for n in names}
    spreads = _spreads(r, jac, free)
    while judge:
        # a collinear coefficient goes first, whatever its spread says: rough rows can make it look needed
        loose = [n for n in free if n in collinear] or [
            n for n in free if spreads[n] > SPREAD_LIMIT and n not in needed
            and not _at_bound(n, float(current[n] or 0.0))]
        if not loose:
            break
        worst = min(loose, key=DROP_ORDER.index)
        budget = max(budget // 2, 8 * len(free))
        rest = tuple(n for n in free if n != worst)
        values2, r2, jac2 = run(rest, {**current, worst: held.get(worst)}, budget)
        if worst not in collinear and _worse(r2, r, len(free)):
            needed.add(worst)
            continue
        not_identifiable.append(worst)
        free, r, jac = rest, r2, jac2
        current = {n: values2[n] for n in names}
        spreads = _spreads(r, jac, free)
    # an overhead the fit can do without, the others unchanged, is one the evidence shows none of
    none: set[str] = set()
    if judge:
        for n in (n for n in free if n in OVERHEADS):
            if not _worse(residuals({**held, **current, n: 0.0}), r, len(free)):
                current[n] = 0.0
                none.add(n)
    report = []
    for n in names:
        value = current[n]
        if n in free:
            assert value is not None
            status = "at bound" if n in none or _at_bound(n, value) else "fitted"
            if status == "at bound" and n in OVERHEADS and value <= BOUNDS[n][0] * 1.05:
                current[n] = value = 0.0
            report.append(Coefficient(n, value, status, spreads.get(n) if status == "fitted" else None, p.get(n)))
        elif n in unneeded and not value:
            report.append(Coefficient(n, 0.0, "at bound", None, p.get(n)))  # the evidence asks for none
        else:
            status = "not identifiable" if n in not_identifiable or n in undecided or n in unneeded else (
                "no effect" if n in names else "registry")
            report.append(Coefficient(n, value, status, None, p.get(n)))
    return {**held, **current}, report


def _fit_late(residuals: Callable[[dict[str, float | None]], np.ndarray], p: dict[str, float | None],
              names: tuple[str, ...], max_evaluations: int, starts: Sequence[Mapping[str, float | None]],
              smooth: bool, collinear: Sequence[str]) -> tuple[dict[str, float | None], list[Coefficient]]:
    """`fit` with the LATE coefficients taken on last: the others fitted at the LATE ones' prior, then the fitted
    ones and the LATE ones searched together from there, kept only if significantly better (an F test)."""
    early = tuple(n for n in names if n not in LATE)
    values, report = fit(residuals, p, early, max_evaluations, starts, True, smooth, collinear, late=False)
    fitted = tuple(c.name for c in report if c.status == "fitted")
    second = (*fitted, *(n for n in names if n in LATE))
    # what the first fit settled (overheads at 0, coefficients put back) is held; the fitted ones are the start
    held = {**p, **{n: values[n] for n in early if n not in fitted}}
    r = residuals(values)
    by_name = {c.name: c for c in report}
    # a search alone first (no judging, a quarter of the budget): evidence that shows none of the LATE time, the
    # usual case, costs no more than that; only a significant gain pays for a judged fit
    probe, _ = fit(residuals, held, second, max_evaluations // 4, [values], False, smooth, collinear, late=False)
    went_to = probe
    if not all(_at_bound(n, float(probe[n] or 0.0)) for n in names if n in LATE) and \
            _worse(r, residuals(probe), len(second)):
        values2, report2 = fit(residuals, held, second, max_evaluations // 2, [probe, values], True, smooth,
                               collinear, late=False)
        taken = [c for c in report2 if c.name in LATE and c.status == "fitted"]
        if taken and _worse(r, residuals(values2), sum(c.status == "fitted" for c in report2)):
            by_name.update({c.name: dataclasses.replace(c, prior=p.get(c.name)) for c in report2})
            return values2, [by_name[n] for n in names]
        went_to = values2
    # not needed: none of it when its search went to the bound or the fit does as well without it (the others
    # unchanged), else the registry's value, not identifiable
    r_went = residuals(went_to)
    for n in (n for n in names if n in LATE):
        went, prior_value = went_to.get(n), p.get(n)
        without = not _worse(residuals({**went_to, n: 0.0}), r_went, len(second))
        if not prior_value and (not went or _at_bound(n, float(went)) or without):
            values[n] = 0.0
            by_name[n] = Coefficient(n, 0.0, "at bound", None, prior_value)
        else:
            values[n] = prior_value or 0.0
            by_name[n] = Coefficient(n, prior_value or 0.0, "not identifiable", None, prior_value)
    return values, [by_name[n] for n in names]


def _jacobian(f: Callable[[np.ndarray], np.ndarray], y: np.ndarray, lo: np.ndarray, hi: np.ndarray,
              step: float = STEP) -> np.ndarray:
    """Central differences of the residuals at y, steps of 5 % (a factor 1.05), one-sided at a bound."""
    cols = []
    for j in range(y.size):
        up, down = y.copy(), y.copy()
        up[j] = min(y[j] + step, hi[j])
        down[j] = max(y[j] - step, lo[j])
        cols.append((f(up) - f(down)) / max(up[j] - down[j], 1e-12))
    return np.column_stack(cols)


def _smooth_rows(f: Callable[[np.ndarray], np.ndarray], y: np.ndarray, lo: np.ndarray, hi: np.ndarray,
                 ) -> np.ndarray:
    """The Jacobian at y for judging the fit, without the rows whose slopes are not slopes: zero where central
    differences over two step widths disagree by more than ROUGH.

    A closed loop's median can jump as a coefficient moves (a request joins the next pass), and such a jump
    passes for a slope that tells two coefficients apart which the physics cannot: an engine's time per step
    and a hop's latency both add a constant to every pass."""
    wide, narrow = _jacobian(f, y, lo, hi), _jacobian(f, y, lo, hi, STEP * 0.5)
    scale = np.maximum(np.abs(wide), np.abs(narrow))
    floor = 1e-3 * np.nanmax(scale, axis=0, initial=0.0)  # slopes this small say nothing either way
    rough = (np.abs(wide - narrow) > ROUGH * scale) & (scale > floor)
    return np.where(rough.any(axis=1, keepdims=True), 0.0, wide)


def _whitening(jac: np.ndarray) -> np.ndarray:
    """Columns mapping unit steps to log-coefficient moves that change the residuals by about one unit each,
    no move longer than MAX_MOVE."""
    _, sv, vt = np.linalg.svd(np.where(np.isfinite(jac), jac, 0.0), full_matrices=True)
    # fewer residuals than coefficients leave directions no residual sees: those get the longest move
    sv = np.concatenate([sv, np.zeros(vt.shape[0] - sv.size)])
    scale = np.minimum(1.0 / np.maximum(sv, 1e-12), MAX_MOVE / 0.02)
    return np.asarray(vt.T * scale)


def _worse(without: np.ndarray, with_: np.ndarray, p: int) -> bool:
    """True when a fit without a coefficient explains the evidence significantly worse (an F test at about 5 %)."""
    a, b = without[np.isfinite(without)], with_[np.isfinite(with_)]
    rss_with = float(b @ b)
    scale = max(rss_with / max(1, b.size - p), FLOOR**2)
    return (float(a @ a) - rss_with) / scale > F_CRITICAL


def _judge_nested(name: str, fitted: Mapping[str, float | None], unneeded: set[str], undecided: set[str]) -> None:
    """File a nested coefficient the fit does without: an overhead its fitted value put at its bound is asked for
    by none of the evidence; otherwise (and always for a refined efficiency) it is not identifiable."""
    at_bound = name in OVERHEADS and _at_bound(name, float(fitted[name] or 0.0))
    (unneeded if at_bound else undecided).add(name)


def _bumped(name: str, value: float) -> float:
    """A value to test a coefficient's effect with: 10 % more, or for an overhead at least a typical size."""
    return max(value * 1.1, TYPICAL.get(name, 0.0))


def _clip(name: str, value: float) -> float:
    low, high, _ = BOUNDS[name]
    return min(max(value, low * 1.01), high / 1.01)


def _at_bound(name: str, value: float) -> bool:
    low, high, _ = BOUNDS[name]
    return value <= low * 1.05 or value >= high / 1.05


def _spreads(r: np.ndarray, jac: np.ndarray, free: tuple[str, ...]) -> dict[str, float]:
    """The factor each free coefficient is known within (see the module's docstring)."""
    if not free:
        return {}
    keep = np.isfinite(r)
    r, jac = r[keep], jac[keep]
    e2 = max(float(r @ r) / max(1, r.size - len(free)), FLOOR**2)
    info = jac.T @ jac
    # a tiny ridge: a direction the evidence does not see gets a huge variance instead of pinv's zero
    ridge = 1e-10 * max(float(np.trace(info)), 1e-30)
    try:
        cov = np.linalg.inv(info + ridge * np.eye(len(free)))
    except np.linalg.LinAlgError:
        return {name: math.inf for name in free}
    out = {}
    for j, name in enumerate(free):
        v = float(cov[j, j])
        out[name] = math.inf if not v > 0 or info[j, j] <= 1e-14 else math.exp(min(50.0, math.sqrt(e2 * v)))
    # a coefficient that moves in step with a loose one (|correlation| above 0.9) is as loose: of two that can
    # stand in for each other, which one the residuals' noise lets look determined is chance
    diag = np.sqrt(np.maximum(np.diag(cov), 1e-300))
    corr = cov / np.outer(diag, diag)
    loose = [j for j, name in enumerate(free) if out[name] > SPREAD_LIMIT]
    for j, name in enumerate(free):
        partners = [out[free[k]] for k in loose if k != j and abs(corr[j, k]) > 0.9]
        if partners and out[name] <= SPREAD_LIMIT:
            out[name] = max(out[name], min(partners))
    return out
