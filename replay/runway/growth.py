"""Growth of a pool's traffic per week, with weekly seasonality taken out, as a log-linear trend with its interval.

The window is cut into whole days counted back from its end (so no day is partial), and the log of each day's
request count is regressed on time and a level per day of the week (ordinary least squares):

    log n_d = a + r t_d + s_(d mod 7) + e_d        t in weeks, sum of no s fixed: one day of the week is the base

r is the log growth per week and its standard error comes from the residuals; the growth per week is e^r - 1
and its interval e^(r +- t_q se) - 1 with Student's t at the confidence asked. The same regression on the daily
mean prompt and output tokens per request gives their trends. Two weeks are the least that separates the trend
from the days of the week; a growth whose interval reaches zero or below is no growth detected.

How far the fit reaches: the load it extrapolates H weeks ahead is uncertain by a factor e^(t_q se H); past the
horizon where that factor reaches 2 (the load could be half or double), a date would be invented from noise.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from dataclasses import dataclass

import numpy as np
from scipy import stats

from canonical.timeunits import DAY_MS
from replay.exceptions import RunwayError

MIN_DAYS = 14                 # two weeks: the trend and the seven days of the week both identified
CONFIDENCE = 0.95
SUPPORT_FACTOR = 2.0          # the load band at the horizon may span at most a factor 2 either way
NO_GROWTH = "no growth detected: the pool holds through the horizon at today's load"


@dataclass(frozen=True)
class Growth:
    """A weekly growth rate of requests (0.05 is +5 % a week) with its interval, and how it was found."""

    per_week: float
    low: float
    high: float
    method: str                        # "fitted" or "given"
    days: int = 0                      # days of history fitted
    prompt_per_week: float | None = None   # trend of prompt tokens per request
    output_per_week: float | None = None   # trend of output tokens per request
    supported_weeks: float = math.inf  # the horizon the fit's interval supports
    day_starts_ms: tuple[int, ...] = ()    # the fitted days (for the load curve) ...
    day_counts: tuple[int, ...] = ()       # ... and their request counts
    end_ms: int = 0                    # the window's end, from which the fitted trend extrapolates

    @property
    def weeks(self) -> float:
        """Weeks of history the fit used."""
        return self.days / 7.0

    @property
    def detected(self) -> bool:
        """True when the growth is positive and its whole interval too."""
        return self.per_week > 0 and self.low > 0

    def factor(self, weeks: float, rate: float | None = None) -> float:
        """The load multiplier `weeks` ahead at this growth (or at `rate`, one end of its interval)."""
        return float((1.0 + (self.per_week if rate is None else rate)) ** weeks)

    def described(self) -> str:
        """How the growth was found, in one phrase."""
        if self.method == "given":
            return f"growth {self.per_week:+.1%}/week as given"
        return (f"growth {self.per_week:+.2%}/week ({CONFIDENCE:.0%} interval {self.low:+.2%} .. {self.high:+.2%}), "
                f"log-linear fit of daily requests with the days of the week taken out, over {self.days} days "
                f"({self.weeks:.1f} weeks)")

    def token_trends(self) -> str:
        """The per-request token trends, in one phrase (empty when not fitted)."""
        if self.prompt_per_week is None or self.output_per_week is None:
            return ""
        return (f"tokens per request: prompt {self.prompt_per_week:+.2%}/week, output {self.output_per_week:+.2%}"
                "/week (replayed as recorded)")


def parse_growth(text: str) -> float | None:
    """`auto` -> None (fit it), `5%/week` or `5%` -> 0.05; raise RunwayError on anything else."""
    value = text.strip().lower()
    if value == "auto":
        return None
    m = re.fullmatch(r"([+-]?\d+(?:\.\d+)?)\s*%(?:\s*/\s*(?:week|w))?", value)
    if not m:
        raise RunwayError(f"--growth {text!r}: expected auto or a rate such as 5%/week")
    rate = float(m.group(1)) / 100.0
    if rate <= -1.0:
        raise RunwayError(f"--growth {text!r}: a weekly growth must be above -100%")
    return rate


def given_growth(rate: float) -> Growth:
    """A growth the user gave: no interval of its own."""
    return Growth(per_week=rate, low=rate, high=rate, method="given")


def day_of(ms: int) -> dt.date:
    """The UTC date of a moment in epoch milliseconds."""
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).date()


def _day(ms: int) -> str:
    return day_of(ms).isoformat()


def _trend(y: np.ndarray, t_weeks: np.ndarray) -> tuple[float, float, int]:
    """Slope per week of y on time with a level per day of the week: (slope, its standard error, dof)."""
    n = y.size
    dow = np.arange(n) % 7
    columns = [np.ones(n), t_weeks] + [(dow == k).astype(float) for k in range(1, 7)]
    x = np.column_stack(columns)
    coef, *_ = np.linalg.lstsq(x, y, rcond=None)
    dof = n - x.shape[1]
    resid = y - x @ coef
    sigma2 = float(resid @ resid) / dof
    cov = sigma2 * np.linalg.pinv(x.T @ x)
    return float(coef[1]), math.sqrt(max(float(cov[1, 1]), 0.0)), dof


def fit_growth(arrival_ms: np.ndarray, in_tokens: np.ndarray, out_tokens: np.ndarray, *, end_ms: int,
               window_days: int, history_start_ms: int, who: str = "the traffic",
               confidence: float = CONFIDENCE) -> Growth:
    """Fit the weekly growth of requests in the `window_days` whole days before end_ms (days before
    history_start_ms, where the store's history begins, are left out). Raise RunwayError for a history too
    short or a day without requests inside it."""
    arrival_ms = np.asarray(arrival_ms, dtype=np.int64)
    starts = end_ms - DAY_MS * np.arange(window_days, 0, -1, dtype=np.int64)
    starts = starts[starts >= history_start_ms]
    if starts.size < MIN_DAYS:
        have = f"{starts.size} whole days" if starts.size else "less than a day"
        raise RunwayError(f"{who}: {have} of stored traffic before {_day(end_ms)}; fitting a weekly growth needs "
                          f"two weeks ({MIN_DAYS} days): pass --growth R%/week")
    day = (arrival_ms - int(starts[0])) // DAY_MS
    keep = (day >= 0) & (day < starts.size)
    counts = np.bincount(day[keep], minlength=starts.size)
    empty = np.flatnonzero(counts == 0)
    if empty.size:
        raise RunwayError(f"{who}: no requests stored on the day from {_day(int(starts[empty[0]]))} "
                          f"({empty.size} empty day(s) in the window): the window has a gap; pass a --window "
                          "that avoids it, or --growth R%/week")
    t = (starts - end_ms).astype(np.float64) / (7 * DAY_MS)
    slope, se, dof = _trend(np.log(counts), t)
    q = float(stats.t.ppf(0.5 + confidence / 2, dof))
    trends = []
    for tokens in (in_tokens, out_tokens):
        mean = np.bincount(day[keep], weights=np.asarray(tokens, dtype=np.float64)[keep],
                           minlength=starts.size) / counts
        trends.append(math.expm1(_trend(np.log(np.maximum(mean, 1e-9)), t)[0]))
    reach = math.log(SUPPORT_FACTOR) / (q * se) if se > 0 else math.inf
    return Growth(per_week=math.expm1(slope), low=math.expm1(slope - q * se), high=math.expm1(slope + q * se),
                  method="fitted", days=int(starts.size), prompt_per_week=trends[0], output_per_week=trends[1],
                  supported_weeks=reach, day_starts_ms=tuple(int(s) for s in starts),
                  day_counts=tuple(int(c) for c in counts), end_ms=end_ms)
