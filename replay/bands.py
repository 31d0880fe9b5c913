"""Bands: how far a prediction can move within the fit's standard errors.

A calibration reports each fitted coefficient's standard error as a factor (`spread`: the value is known within
x / spread .. x x spread, replay.fitting). A prediction made with the fitted values moves when a coefficient
moves by its factor; the band is that motion of every fitted coefficient combined in quadrature in log space:

    s = sqrt(sum_j max(|log(p(x_j x spread_j) / p)|, |log(p(x_j / spread_j) / p)|)^2),   band = p / e^s .. p x e^s

Each coefficient is moved with the others held, so the band ignores how the fit's errors correlate: where two
coefficients trade off (the engine's time per step against a hop's latency) it is wider than the joint error.
A coefficient is never moved past its physical bound (an efficiency past 1).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

from replay.fitting import BOUNDS, Coefficient, apply
from replay.fleet import PoolSpec

Band = tuple[float, float]


def bands(spec: PoolSpec, spread: Mapping[str, float], predict: Callable[[PoolSpec], Sequence[float | None]],
          ) -> list[Band | None]:
    """(low, high) of each of predict(spec)'s values within the coefficients' spreads; None where it has none."""
    base = list(predict(spec))
    squares = [0.0] * len(base)
    for name, factor in spread.items():
        value = getattr(spec, name, None)
        if not value or factor <= 1.0:
            continue
        high = BOUNDS[name][1] if name in BOUNDS else math.inf
        worst = [0.0] * len(base)
        for moved in (min(value * factor, high), value / factor):
            if moved == value:
                continue
            for i, (b, g) in enumerate(zip(base, predict(apply(spec, {name: moved})), strict=True)):
                if b and g and b > 0 and g > 0:
                    worst[i] = max(worst[i], abs(math.log(g / b)))
        squares = [s + w * w for s, w in zip(squares, worst, strict=True)]
    return [None if b is None else (b / math.exp(math.sqrt(s)), b * math.exp(math.sqrt(s)))
            for b, s in zip(base, squares, strict=True)]


def spread_of(coefficients: Sequence[Coefficient]) -> dict[str, float]:
    """The spreads of a fit's fitted coefficients, by name (one the evidence leaves unbounded has none to carry)."""
    return {c.name: c.spread for c in coefficients if c.status == "fitted" and c.spread and math.isfinite(c.spread)}
