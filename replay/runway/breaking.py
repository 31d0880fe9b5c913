"""The first date a pool fails its SLA tolerance, replaying the recent window at the load of future dates.

A date's load: each request of the window is replayed about (1 + g)^w times (replay.runway.scale), where g is
its pool's weekly growth and w the weeks from the window's middle (the load the window stands for) to the date.
The whole fleet is replayed under the candidate, so a pool's violation rate counts the requests the candidate
routes to it (plus those it rejects that came from it). Days are searched by bisection, each replay narrowing
every pool's bracket, to the first day whose rate passes the tolerance.

The band: the replay of one window is one sample of the queue, so the breaking load has a sampling error (from
the spread of the rate between the window's days, through the slope of the rate against the load); the
calibration's error on the step time moves the load a pool holds by the same factor; the two combine into an
interval on the breaking load, and the ends of the growth's interval turn it into the earliest and latest dates.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import polars as pl

from canonical.timeunits import DAY_MS, WEEK_MS
from pool_registry import Registry
from replay.candidate import Candidate
from replay.costmodel import provisioned_cost
from replay.engine import run_replay
from replay.exceptions import RunwayError
from replay.fleet import PoolSpec, pools_by_id
from replay.runway.growth import NO_GROWTH, Growth, day_of
from replay.runway.scale import ORIGIN, scaled, scaler

# breaks within the horizon; holds through it; holds as far as the load cap (MAX_LOAD) reaches; gets no date for
# want of growth, or of requests routed to it
STATUSES = ("breaks", "holds", "holds_to_cap", "no_growth", "too_few")
Z = 1.96                                  # two-sided 95 %, as the growth's interval
MONTH_S = 365.25 / 12 * 86_400            # an average month
FLEET = ""                                # the growth key of requests observed on no pool
MAX_LOAD = 8.0                            # the most times the replay scales the window
MIN_REQUESTS = 200                        # a pool judged on fewer requests than this gets no date
BATCHES = 7                               # spans of the window whose rates give the sampling error
ADD_STEPS = 5                             # replays spent finding enough replicas to add, doubling them
Progress = Callable[[float, str], None]


@dataclass(frozen=True)
class PoolRunway:
    """One pool's runway: its growth, the breaking date with its band, and what it takes to hold the horizon."""

    pool: str
    growth: Growth
    breaks_on: dt.date | None
    breaks_on_low: dt.date | None
    breaks_on_high: dt.date | None
    violation_rate_now: float
    replicas_to_add: int | None
    added_cost_per_month_usd: float | None
    notes: tuple[str, ...] = ()
    curve: tuple[tuple[int, float, float], ...] = ()   # evaluated (day from today, load factor, violation rate)
    per_day: float = 0.0                               # requests a day of its growth's origin in the replayed window
    status: str = "holds"                              # one of STATUSES

    def data(self) -> dict[str, object]:
        """The JSON record of the pool."""
        iso = (lambda d: d.isoformat() if d else None)  # noqa: E731
        return {"pool": self.pool, "growth_per_week": self.growth.per_week, "growth_low": self.growth.low,
                "growth_high": self.growth.high, "breaks_on": iso(self.breaks_on),
                "breaks_on_low": iso(self.breaks_on_low), "breaks_on_high": iso(self.breaks_on_high),
                "violation_rate_now": self.violation_rate_now, "replicas_to_add": self.replicas_to_add,
                "added_cost_per_month_usd": self.added_cost_per_month_usd, "notes": list(self.notes)}


@dataclass(frozen=True)
class Runway:
    """Every pool's runway from `today` (the end of the stored traffic) over the horizon."""

    today: dt.date
    horizon_weeks: float
    tolerance: float
    replayed: str
    pools: tuple[PoolRunway, ...]

    @property
    def horizon_end(self) -> dt.date:
        """The last day of the horizon."""
        return self.today + dt.timedelta(days=round(self.horizon_weeks * 7))

    @property
    def breaking(self) -> tuple[PoolRunway, ...]:
        """The pools that break within the horizon."""
        return tuple(p for p in self.pools if p.breaks_on is not None and p.breaks_on <= self.horizon_end)

    def weeks_left(self, p: PoolRunway) -> float | None:
        """Weeks from today to a pool's breaking date, None when it holds through the horizon."""
        return None if p.breaks_on is None else (p.breaks_on - self.today).days / 7.0

    def data(self) -> dict[str, object]:
        """The JSON of `hetpool replay runway --json`."""
        return {"pools": [p.data() for p in self.pools]}


@dataclass(frozen=True)
class _Eval:
    rates: dict[str, float]
    se: dict[str, float]
    factors: dict[str, float]
    counts: dict[str, int]


def pool_rates(requests: pl.DataFrame, origin: np.ndarray, pools: list[str], start_ms: int, end_ms: int
               ) -> tuple[dict[str, float], dict[str, float], dict[str, int]]:
    """Each pool's SLA violation rate over the requests routed to it plus those rejected that came from it (or
    from no known pool), and its standard error from the spread between seven equal spans of the window (batch
    means: a day each of a week)."""
    routed = requests["pool"].to_numpy()
    outcome = requests["outcome"].to_numpy()
    met = requests["sla_met"].fill_null(False).to_numpy()
    bad = (outcome != "served") | ~met
    rejected = outcome == "rejected"
    day = np.clip((requests["arrival_ms"].to_numpy() - start_ms) * BATCHES // max(1, end_ms - start_ms), 0,
                  BATCHES - 1)
    rates, errors, counts = {}, {}, {}
    for p in pools:
        mine = (routed == p) | (rejected & ((origin == p) | (origin == FLEET)))
        n = int(mine.sum())
        rate = float(bad[mine].sum() / n) if n else 0.0
        rates[p], counts[p] = rate, n
        n_b = np.bincount(day[mine], minlength=1).astype(float)
        k_b = np.bincount(day[mine], weights=bad[mine].astype(float), minlength=n_b.size)
        full = n_b > 0
        b = int(full.sum())
        if b >= 2:
            dev = k_b[full] - rate * n_b[full]
            errors[p] = math.sqrt(float(dev @ dev) * b / (b - 1)) / float(n_b[full].sum())
        else:
            errors[p] = math.nan
    return rates, errors, counts


def compute_runway(candidate: Candidate, window: pl.DataFrame, registry: Registry, growths: dict[str, Growth], *,
                   start_ms: int, end_ms: int, pools: list[str], tolerance: float, horizon_weeks: float,
                   seed: int = 0, history: pl.DataFrame | None = None, telemetry: pl.DataFrame | None = None,
                   spreads: dict[str, float] | None = None, progress: Progress | None = None) -> Runway:
    """The runway of each pool in `pools` from the window [start_ms, end_ms) of requests (an `origin` column
    naming the pool each was observed on, "" for none) at the given growths (by origin; FLEET for ""), with
    `spreads` the calibration's error on each pool's step time as a factor (1.1 is +-10 %)."""
    specs = pools_by_id(registry, candidate)
    unknown = [p for p in pools if p not in specs]
    if unknown:
        raise RunwayError(f"unknown pool {unknown[0]!r}; replayable: {', '.join(specs)}")
    if window.height == 0:
        raise RunwayError("no requests in the replayed window")
    horizon_days = max(1, round(horizon_weeks * 7))
    mid_ms = (start_ms + end_ms) / 2
    rates_of = {o: (g.per_week if g.detected else 0.0) for o, g in growths.items()}
    origins = np.asarray(window[ORIGIN].to_numpy(), dtype=object)
    missing = sorted({str(o) for o in set(origins.tolist())} - set(rates_of))
    if missing:
        raise RunwayError(f"no growth for requests observed on {missing[0]!r}")

    def factors_at(day: int | None) -> dict[str, float]:
        if day is None:
            return {o: 1.0 for o in rates_of}
        weeks = (end_ms + day * DAY_MS - mid_ms) / WEEK_MS
        return {o: (1.0 + r) ** weeks for o, r in rates_of.items()}

    # the replay scales the window at most MAX_LOAD times: past that the search stops, and says so
    last_day = horizon_days
    while last_day > 1 and max(factors_at(last_day).values()) > MAX_LOAD:
        last_day -= 1
    top = max(factors_at(last_day).values())
    draws = scaler(window, start_ms, end_ms, top, seed)
    cache: dict[tuple[int | None, tuple[tuple[str, int], ...]], _Eval] = {}
    steps = [0]

    def evaluate(day: int | None, added: dict[str, int] | None = None) -> _Eval:
        key = (day, tuple(sorted((added or {}).items())))
        if key in cache:
            return cache[key]
        f = factors_at(day)
        per_request = np.array([f[o] for o in origins], dtype=np.float64) if day is not None \
            else np.ones(window.height)
        traffic = scaled(draws, per_request)
        cand = candidate
        if added:
            cand = dataclasses.replace(candidate, pools={**candidate.pools, **{
                p: dataclasses.replace(candidate.override(p), replicas=specs[p].replicas + k)
                for p, k in added.items()}})
        steps[0] += 1
        if progress:
            what = "as recorded" if day is None else f"at the load of {day_of(end_ms) + dt.timedelta(days=day)}"
            progress(min(0.95, steps[0] / 20), f"replay {steps[0]}: the window {what}")
        result = run_replay(cand, traffic, registry, seed, history, telemetry)
        origin = np.asarray(traffic[ORIGIN].to_numpy(), dtype=object)
        rates, se, counts = pool_rates(result.requests, origin, pools, start_ms, end_ms)
        cache[key] = _Eval(rates, se, f, counts)
        return cache[key]

    first, last = evaluate(0), evaluate(last_day)
    # a rate over a handful of requests is noise: such a pool is said to be so, never given a date
    few = {p for p in pools if first.counts[p] < MIN_REQUESTS}
    brackets: dict[str, tuple[int, int]] = {}
    for p in pools:
        if first.rates[p] <= tolerance < last.rates[p] and _grows(p, growths) and p not in few:
            brackets[p] = (0, last_day)
    while True:
        open_ = [(hi - lo, p) for p, (lo, hi) in brackets.items() if hi - lo > 1]
        if not open_:
            break
        _, p = max(open_)
        lo, hi = brackets[p]
        m = _next_day(lo, hi, cache[(lo, ())].rates[p], cache[(hi, ())].rates[p], tolerance)
        e = evaluate(m)
        for q, (qlo, qhi) in brackets.items():
            if qlo < m < qhi:
                brackets[q] = (qlo, m) if e.rates[q] > tolerance else (m, qhi)
    today = day_of(end_ms)
    breaking_day: dict[str, int] = {}
    for p in pools:
        if p in few:
            continue
        if first.rates[p] > tolerance:
            breaking_day[p] = 0
        elif p in brackets:
            breaking_day[p] = brackets[p][1]
    added, short = _replicas_to_add(evaluate, breaking_day, last_day, factors_at, specs, tolerance,
                                    {p: _origin_of(p, growths) for p in pools})
    out = []
    span = (end_ms - start_ms) / DAY_MS
    for p in pools:
        g = growths[_origin_of(p, growths)]
        curve = tuple(sorted((d, e.factors[_origin_of(p, growths)], e.rates[p])
                             for (d, extra), e in cache.items() if d is not None and not extra))
        notes = [g.described()] + ([g.token_trends()] if g.token_trends() else [])
        if _origin_of(p, growths) == FLEET:
            notes.append("no request names the pool it was served on: the fleet's growth applies to every pool")
        low = high = None
        day = breaking_day.get(p)
        status = "breaks" if day is not None else "holds"
        if p in few:
            status = "too_few"
            notes.append(f"only {first.counts[p]} of the replayed requests reach it under this candidate at today's "
                         f"load: too few (under {MIN_REQUESTS}) to tell a violation rate from noise, so no date")
        elif day == 0:
            notes.append(f"already over the tolerance at today's load: {first.rates[p]:.2%} of its requests miss "
                         f"their SLA (limit {tolerance:.2%})")
            low = high = today
        elif day is not None:
            low, high, band = _band(p, _origin_of(p, growths), day, cache, g, tolerance, end_ms, mid_ms,
                                    (spreads or {}).get(p))
            notes.append(band)
        elif not g.detected:
            status = "no_growth"
            notes.append(NO_GROWTH)
        elif last_day < horizon_days:
            status = "holds_to_cap"
            notes.append(f"holds to {today + dt.timedelta(days=last_day)} ({last.rates[p]:.2%} of its requests miss "
                         f"their SLA), where the load reaches {MAX_LOAD:g} times the replayed window's; the search "
                         "stops there, since so scaled the window is no sample of the traffic: shorten --horizon")
        else:
            notes.append(f"holds through the horizon: {last.rates[p]:.2%} of its requests miss their SLA at the "
                         f"load of {today + dt.timedelta(days=last_day)} (limit {tolerance:.2%})")
        k = added.get(p) if p not in short else None
        cost = provisioned_cost(dataclasses.replace(specs[p], replicas=k), MONTH_S) if k else None
        if p in short:
            notes.append(f"{added[p]} more replicas still leave it over the tolerance at the horizon's load under "
                         "this candidate's routing: more replicas draw more of the fleet's traffic to it, or its "
                         "requests miss their tier for want of speed; try the candidate's routing or tiers")
        elif k:
            until = "the horizon" if last_day == horizon_days else \
                f"{today + dt.timedelta(days=last_day)} ({MAX_LOAD:g} times the window's load; not the horizon)"
            notes.append(f"{k} more replica(s) of {specs[p].devices_per_replica} device(s) hold the SLA through "
                         f"{until}, at ${cost:,.0f} a month")
        out.append(PoolRunway(
            pool=p, growth=g, breaks_on=today + dt.timedelta(days=day) if day is not None else None,
            breaks_on_low=low, breaks_on_high=high, violation_rate_now=first.rates[p],
            replicas_to_add=k if day is not None else None, added_cost_per_month_usd=cost, notes=tuple(notes),
            curve=curve, per_day=float((origins == _origin_of(p, growths)).sum()) / span, status=status))
    replayed = f"{window.height:,} requests of the {span:.1f} days to {today} ({steps[0]} replays)"
    return Runway(today=today, horizon_weeks=horizon_weeks, tolerance=tolerance, replayed=replayed, pools=tuple(out))


def _next_day(lo: int, hi: int, r_lo: float, r_hi: float, tolerance: float) -> int:
    """The day to replay next inside (lo, hi): where the log of the rate, straight between the ends, meets the
    tolerance (the rate climbs about exponentially with the load near it), kept an eighth of the bracket away
    from its ends so a bent curve still halves it within a few steps; the middle when the low end saw none."""
    if r_lo <= 0 or r_hi <= r_lo:
        return (lo + hi) // 2
    at = lo + (math.log(tolerance) - math.log(r_lo)) / (math.log(r_hi) - math.log(r_lo)) * (hi - lo)
    margin = (hi - lo) / 8
    return min(hi - 1, max(lo + 1, round(min(max(at, lo + margin), hi - margin))))


def _origin_of(pool: str, growths: dict[str, Growth]) -> str:
    return pool if pool in growths else FLEET


def _grows(pool: str, growths: dict[str, Growth]) -> bool:
    return growths[_origin_of(pool, growths)].detected or any(g.detected for g in growths.values())


def _band(pool: str, origin: str, day: int, cache: dict[tuple[int | None, tuple[tuple[str, int], ...]], _Eval],
          g: Growth, tolerance: float, end_ms: int, mid_ms: float, spread: float | None
          ) -> tuple[dt.date, dt.date | None, str]:
    """Earliest and latest breaking dates from the sampling error, the calibration's spread and the growth's
    interval, and how they were found."""
    points = [(math.log(e.factors[origin]), e.rates[pool], e.se[pool]) for (d, extra), e in cache.items()
              if d is not None and not extra and e.rates[pool] > 0]
    at = next(e for (d, extra), e in cache.items() if d == day and not extra)
    x = math.log(at.factors[origin])
    near = [(lx, math.log(r)) for lx, r, _ in points if tolerance / 10 <= r <= tolerance * 10]
    sampling = 0.0
    parts = []
    if len({lx for lx, _ in near}) >= 2:
        lx, lr = np.array(near).T
        slope = float(np.polyfit(lx, lr, 1)[0])
        se = at.se[pool]
        if slope > 0 and math.isfinite(se) and at.rates[pool] > 0:
            sampling = Z * se / at.rates[pool] / slope
            parts.append(f"the replay's sampling error ({se / at.rates[pool]:.0%} on the rate)")
    calibration = math.log(spread) if spread and spread > 1 else 0.0
    if calibration:
        parts.append(f"the calibration's ±{(spread or 1) - 1:.0%} on the step time")
    else:
        parts.append("no calibration error (the candidate carries none)")
    if not sampling:
        parts.append("no sampling error (too few replays near the tolerance to measure the rate's slope)")
    half = math.hypot(sampling, calibration)
    rel = (end_ms - mid_ms) / WEEK_MS

    def date_at(lx: float, rate: float) -> dt.date | None:
        if rate <= 0:
            return None
        weeks = lx / math.log1p(rate) - rel
        return day_of(end_ms) + dt.timedelta(days=max(0, math.floor(weeks * 7)))

    low = date_at(x - half, g.high) or day_of(end_ms)
    high = date_at(x + half, g.low)
    if g.method == "fitted":
        parts.append(f"the growth's interval {g.low:+.2%} .. {g.high:+.2%}/week")
    return low, high, f"band from {', '.join(parts)}"


def _replicas_to_add(evaluate: Callable[..., _Eval], breaking_day: dict[str, int], horizon_days: int,
                     factors_at: Callable[[int | None], dict[str, float]], specs: dict[str, PoolSpec],
                     tolerance: float, origin: dict[str, str]) -> tuple[dict[str, int], list[str]]:
    """Replicas each breaking pool adds to hold the tolerance at the horizon's load: first as many as the load
    grew beyond what the pool held, then twice as many for the pools still over, then the fewest that still hold
    by bisection; and the pools still over after ADD_STEPS replays or whose rate more replicas did not lower."""
    if not breaking_day:
        return {}, []
    end = factors_at(horizon_days)
    added = {}
    for p, day in breaking_day.items():
        held = factors_at(max(day - 1, 0) if day else None)[origin[p]]
        added[p] = max(1, math.ceil(specs[p].replicas * (end[origin[p]] / held - 1)))
    over: list[str] = []
    unaided = evaluate(horizon_days).rates
    for step in range(ADD_STEPS):
        e = evaluate(horizon_days, added)
        over = [p for p in added if e.rates[p] > tolerance]
        # a pool whose rate twice as many replicas barely moved misses its SLA for want of speed, not capacity
        stuck = [p for p in over if step >= 1 and e.rates[p] > 0.8 * unaided[p]]
        if not over or step == ADD_STEPS - 1 or stuck:
            over = stuck + [p for p in over if p not in stuck]
            break
        for p in over:
            added[p] *= 2
    # then down: a pool's queue shares its servers better the more it has, so the load's ratio overshoots
    low = {p: 0 for p in added if p not in over}
    while any(added[p] - low[p] > 1 for p in low):
        trial = {p: (low[p] + added[p]) // 2 if p in low and added[p] - low[p] > 1 else k for p, k in added.items()}
        e = evaluate(horizon_days, {p: k for p, k in trial.items() if k})
        for p in low:
            if trial[p] != added[p]:
                if e.rates[p] > tolerance:
                    low[p] = trial[p]
                else:
                    added[p] = trial[p]
    return added, over
