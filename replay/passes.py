"""Closed-form sums over a run of identical passes: how long k passes take, and how many end within a time.

Pass j of a run takes max(a + b j, c + d j) + o: memory (a, growing by b a pass as the context grows), compute
(c, growing by d with attention over the context) and the fixed part o (collectives, engine time); see
costmodel.py for where the coefficients come from. This module has no imports beyond `math`, so that it can
be compiled with the replica (replay/compiled.py).
"""

from __future__ import annotations

import math


def _phases(a: float, b: float, c: float, d: float) -> tuple[float, float, float, float, float]:
    """(s, p1, q1, p2, q2): passes j < s of a run follow p1 + q1 j, the later ones p2 + q2 j, where pass j
    takes max(a + b j, c + d j) (memory, compute) without its fixed part."""
    if b > d:  # memory grows faster: compute-bound first, if at all
        if a >= c:
            return 0.0, c, d, a, b
        q = (c - a) / (b - d)
        return (math.inf if q > 1e15 else float(math.ceil(q))), c, d, a, b
    if b < d:  # compute grows faster: memory-bound first, if at all
        if a < c:
            return 0.0, a, b, c, d
        q = (a - c) / (d - b)
        return (math.inf if q > 1e15 else float(math.floor(q) + 1)), a, b, c, d
    return (0.0, c, d, a, b) if a >= c else (math.inf, c, d, a, b)


def _line(p: float, q: float, j0: int, j1: int) -> float:
    """Sum of p + q j over j0 <= j < j1."""
    return (j1 - j0) * p + q * (j1 * (j1 - 1) - j0 * (j0 - 1)) / 2.0


def run_seconds(a: float, b: float, c: float, o: float, k: int, d: float = 0.0) -> float:
    """Time of k passes whose j-th takes max(a + b j, c + d j) + o (memory and compute grow with context)."""
    if d == 0.0:  # compute does not grow (no attention term): the common case, in its own short form
        if a >= c:
            return k * (a + o) + b * k * (k - 1) / 2.0
        q = (c - a) / b if b > 0.0 else math.inf
        if q > 1e15 or k <= q:
            return k * (c + o)
        js = math.ceil(q)
        if k <= js:
            return k * (c + o)
        return js * (c + o) + (k - js) * (a + o) + b * (k * (k - 1) - js * (js - 1)) / 2.0
    s, p1, q1, p2, q2 = _phases(a, b, c, d)
    if k <= s:
        return _line(p1, q1, 0, k) + k * o
    si = int(s)
    return _line(p1, q1, 0, si) + _line(p2, q2, si, k) + k * o


def fit_passes(p: float, q: float, j0: int, rest: float) -> int:
    """About how many passes p + q j + (o folded into p) from j0 on end within `rest` seconds."""
    lin, quad = p + q * j0, q / 2.0
    if quad <= 0.0 or (lin > 0 and quad * rest < 1e-12 * lin * lin):
        return int(rest / lin) if lin > 0 else 1 << 40
    b = lin - quad  # quad n^2 + (lin - quad) n - rest = 0
    return int((-b + math.sqrt(b * b + 4.0 * quad * rest)) / (2.0 * quad))


def passes_within(a: float, b: float, c: float, o: float, dur: float, d: float = 0.0) -> int:
    """The number of whole passes of such a run that end by time dur after its start (the inverse of run_seconds)."""
    if dur <= 0.0:
        return 0
    if d == 0.0 and a >= c and a + o > 0.0:  # memory-bound from the first pass on: one phase
        ao = a + o
        k = fit_passes(ao, b, 0, dur)
        while k > 0 and k * ao + b * k * (k - 1) / 2.0 > dur:  # run_seconds' own short form, so the same floats
            k -= 1
        while (k + 1) * ao + b * (k + 1) * k / 2.0 <= dur:
            k += 1
        return k
    s, p1, q1, p2, q2 = _phases(a, b, c, d)
    first = fit_passes(p1 + o, q1, 0, dur)
    if first <= s:
        k = first
    else:
        si = int(s)
        k = si + fit_passes(p2 + o, q2, si, dur - run_seconds(a, b, c, o, si, d))
    while k > 0 and run_seconds(a, b, c, o, k, d) > dur:  # float rounding of the closed form
        k -= 1
    while run_seconds(a, b, c, o, k + 1, d) <= dur:
        k += 1
    return k
