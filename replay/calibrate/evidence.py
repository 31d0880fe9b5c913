"""The evidence a fit compares with: a pool's observed requests (sampled as stretches) and its benchmark rows,
each replayed on trial coefficients to give residuals in log time."""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any

import numpy as np
import polars as pl

from replay.bench import RANGE_STYLES, STATISTIC_NAMES, STATISTICS, BenchPoint, closed_loop, fixed_lengths
from replay.candidate import Candidate
from replay.engine import prepare_traffic
from replay.fleet import PoolSpec
from replay.plan import build_plan
from replay.policies import get_policy
from replay.simulator import simulate

STRETCHES = 5          # contiguous stretches sampled from a long trace
STRETCH = 400          # scored requests per stretch
WARMUP = 100           # requests replayed before each stretch and not scored
GAP_S = 3600.0         # idle time put between stretches so that they do not meet
MISS = 5.0             # residual of a request the trial model did not serve
GROUPS = 24            # groups of similar prompts (and arrival times) compared by their mean log time
MIN_GROUP = 20
EPOCH_MS = 946_684_800_000  # 2000-01-01: arrival times from before it are a trace's own offsets, not clock times


def sample_stretches(rows: pl.DataFrame) -> pl.DataFrame:
    """The rows to replay: all of them when few, else a few contiguous stretches with warm-ups, spread out in
    time and pulled together with idle gaps between; `scored` marks the requests whose errors count."""
    n = rows.height
    if "seq" not in rows.columns:
        rows = rows.with_row_index("seq").with_columns(pl.col("seq").cast(pl.Int64))
    rows = rows.with_columns(pl.col("arrival_ms").alias("at_ms"))  # as stored: what labels show, however shifted
    total = STRETCHES * (STRETCH + WARMUP)
    if n <= total:
        return rows.with_columns(pl.lit(True).alias("scored"))
    parts = []
    offset_ms = 0
    starts = np.linspace(0, n - STRETCH - WARMUP, STRETCHES).astype(int)
    for k, s in enumerate(starts.tolist()):
        part = rows.slice(s, STRETCH + WARMUP).with_columns(
            (pl.int_range(pl.len()) >= WARMUP).alias("scored"))
        first = int(part["arrival_ms"][0])
        part = part.with_columns(pl.col("arrival_ms") - first + offset_ms, pl.col("seq") + k * n)
        offset_ms = int(part["arrival_ms"][-1]) + int(GAP_S * 1000)
        parts.append(part)
    return pl.concat(parts)


def _groups(key: np.ndarray, count: int) -> list[np.ndarray]:
    """Indices of `key` split into about `count` groups of similar size by value."""
    if key.size < MIN_GROUP:
        return []
    count = min(count, key.size // MIN_GROUP)  # a short trace makes fewer groups, not groups too small to keep
    edges = np.unique(np.quantile(key, np.linspace(0, 1, count + 1)[1:-1]))
    which = np.searchsorted(edges, key, side="right")
    return [idx for g in range(edges.size + 1) if (idx := np.flatnonzero(which == g)).size >= MIN_GROUP]


def _log_means(values: np.ndarray, groups: list[np.ndarray]) -> np.ndarray:
    """Mean log value per group: multiplicative noise that is symmetric in log leaves it unbiased."""
    with np.errstate(divide="ignore", invalid="ignore"):
        logs = np.log(values)
    return np.array([np.mean(logs[g]) for g in groups])


class Trace:
    """The observed requests of one pool, replayed on trial coefficients.

    Without the observed replica of every request, which replica a request joins can change with a small
    change of the coefficients, and with it that one request's wait; so the fit compares the mean log TTFT
    and TPOT of groups of requests (similar prompts, and for TPOT also similar arrival times, which saw
    similar batches) rather than request by request.
    """

    def __init__(self, spec: PoolSpec, rows: pl.DataFrame) -> None:
        frame = prepare_traffic(sample_stretches(rows))
        self.plan = build_plan(frame, (spec,), Candidate(name="calibrate", policy="observed"),
                               np.random.default_rng(0))
        self.policy = get_policy("observed")
        scored = frame["scored"].to_numpy()
        out = frame["out_tokens"].to_numpy().astype(float)
        prompt = (frame["in_tokens"] - frame["cached_tokens"]).to_numpy().astype(float)
        arrival = frame["arrival_ms"].to_numpy().astype(float)
        stored = frame["at_ms"].to_numpy().astype(float)
        ttft = frame["obs_ttft_s"].fill_null(np.nan).to_numpy().astype(float)
        e2e = frame["obs_e2e_s"].fill_null(np.nan).to_numpy().astype(float)
        ok = scored & np.isfinite(ttft) & (ttft > 0)
        if "outcome" in frame.columns:
            ok &= frame["outcome"].fill_null("ok").to_numpy() == "ok"
        self.ttft_at = np.flatnonzero(ok)
        many = ok & np.isfinite(e2e) & (out > 1) & (e2e > ttft)
        self.tpot_at = np.flatnonzero(many)
        self.out = out
        self.obs_ttft = ttft[self.ttft_at]
        self.obs_tpot = ((e2e - ttft) / np.maximum(out - 1, 1))[self.tpot_at]
        self.prompts = prompt[self.ttft_at]
        self.ttft_groups = _groups(prompt[self.ttft_at], GROUPS)
        by_prompt = _groups(prompt[self.tpot_at], GROUPS)
        by_arrival = _groups(arrival[self.tpot_at], GROUPS)
        self.tpot_groups = by_prompt + by_arrival
        self.labels = {"TTFT": [_span("prompts of", prompt[self.ttft_at][g], "tokens") for g in self.ttft_groups],
                       "TPOT": [_span("prompts of", prompt[self.tpot_at][g], "tokens") for g in by_prompt]
                       + [_arrivals(stored[self.tpot_at][g]) for g in by_arrival]}
        self.obs_ttft_means = _log_means(self.obs_ttft, self.ttft_groups)
        self.obs_tpot_means = _log_means(self.obs_tpot, self.tpot_groups)

    def model(self, spec: PoolSpec) -> tuple[np.ndarray, np.ndarray]:
        """Model TTFT and TPOT of the scored requests on a trial pool."""
        raw = simulate(dataclasses.replace(self.plan, pools=(spec,)), self.policy, {}, "queue")
        tpot = (raw.e2e - raw.ttft) / np.maximum(self.out - 1, 1)
        return raw.ttft[self.ttft_at], tpot[self.tpot_at]

    def compared(self, ttft: np.ndarray, tpot: np.ndarray) -> dict[str, tuple[np.ndarray, np.ndarray, list[str]]]:
        """What the fit compares, per kind: (model, observed, label) of each group, as geometric means."""
        return {"TTFT": (np.exp(_log_means(ttft, self.ttft_groups)), np.exp(self.obs_ttft_means), self.labels["TTFT"]),
                "TPOT": (np.exp(_log_means(tpot, self.tpot_groups)), np.exp(self.obs_tpot_means), self.labels["TPOT"])}

    def residuals(self, spec: PoolSpec) -> np.ndarray:
        """Model minus observed mean log of every group, weighted by the square root of its share."""
        ttft, tpot = self.model(spec)
        out = []
        for values, groups, observed in ((ttft, self.ttft_groups, self.obs_ttft_means),
                                         (tpot, self.tpot_groups, self.obs_tpot_means)):
            diff = _log_means(values, groups) - observed
            weight = np.sqrt([g.size for g in groups]) / np.sqrt(max(1, values.size))
            out.append(np.where(np.isfinite(diff), diff, MISS) * weight)
        return np.concatenate(out)


class Bench:
    """Benchmark rows of one pool, run closed-loop on trial coefficients."""

    def __init__(self, rows: pl.DataFrame) -> None:
        self.rows: list[tuple[int, int, int]] = rows.select("isl", "osl", "concurrency").rows()
        def column(name: str, default: object) -> list[Any]:
            return rows[name].to_list() if name in rows.columns else [default] * rows.height
        self.arrivals: list[str] = column("arrivals", "staggered")
        said: list[str | None] = column("statistic", None)  # which figure of its requests a row is, if it says
        self.statistics: list[str] = [s or STATISTICS[0] for s in said]
        self.unsaid: list[int] = [k for k, s in enumerate(said) if s is None]
        # how each row's client drew its lengths and how many requests it sent: replayed as it ran
        self.draws: list[tuple[float, str, int | None]] = list(zip(
            column("range_ratio", 0.0), column("range_style", RANGE_STYLES[0]), column("num_prompts", None),
            strict=True))
        self.prompts = rows["isl"].to_numpy().astype(float)
        self.last: tuple[PoolSpec, list[BenchPoint]] | None = None  # the last trial pool's points, asked again
        self.obs_ttft = rows["ttft_ms"].to_numpy() / 1000
        self.obs_tpot = rows["tpot_ms"].to_numpy() / 1000

    def compared(self, ttft: np.ndarray, tpot: np.ndarray) -> dict[str, tuple[np.ndarray, np.ndarray, list[str]]]:
        """What the fit compares, per kind: (model, observed, label) of each row."""
        labels = [f"ISL {isl}, OSL {osl}{f' ({d})' if (d := _drawn(r, style)) else ''} at concurrency {c}"
                  for (isl, osl, c), (r, style, _) in zip(self.rows, self.draws, strict=True)]
        return {"TTFT": (ttft, self.obs_ttft, labels), "TPOT": (tpot, self.obs_tpot, labels)}

    def replayed(self, k: int) -> str:
        """How row k's client is run and what it reports: 'staggered; 64 prompts; medians', or 'lockstep; lengths
        drawn up to them, ratio 0.8; 640 prompts; means'."""
        ratio, style, prompts = self.draws[k]
        drawn = _drawn(ratio, style)
        return "; ".join(x for x in (self.arrivals[k], drawn and f"lengths {drawn}",
                                     f"{prompts or calibration_requests(self.rows[k][2])} prompts",
                                     STATISTIC_NAMES[self.statistics[k]]) if x)

    def residuals(self, spec: PoolSpec) -> np.ndarray:
        """log(model / observed) of every row's TTFT and TPOT."""
        ttft, tpot = self.model(spec)
        return np.concatenate([_log_residual(ttft, self.obs_ttft), _log_residual(tpot, self.obs_tpot)])

    def model(self, spec: PoolSpec) -> tuple[np.ndarray, np.ndarray]:
        """TTFT and TPOT of every row on a trial pool, each the statistic its row gives (a median, mean or p99)."""
        figures = [p.latency_ms(stat) for p, stat in zip(self.points(spec), self.statistics, strict=True)]
        return (np.array([ttft for ttft, _ in figures]) / 1000,
                np.array([np.nan if tpot is None else tpot for _, tpot in figures]) / 1000)

    def points(self, spec: PoolSpec) -> list[BenchPoint]:
        """Every row run closed-loop on a trial pool as its client ran; the same pool asked again is not rerun."""
        if self.last is not None and self.last[0] is spec:
            return self.last[1]
        points = [closed_loop(spec, c, isl, osl, n or calibration_requests(c), arrivals=a, range_ratio=r,
                              range_style=style)
                  for (isl, osl, c), a, (r, style, n) in zip(self.rows, self.arrivals, self.draws, strict=True)]
        self.last = (spec, points)
        return points

    def means_and_medians(self, spec: PoolSpec, rows: list[int]) -> list[tuple[float, float]]:
        """(mean, median) TTFT in ms of the given rows on a pool: how far apart the two figures a row may be lie."""
        points = self.points(spec)
        return [(points[k].ttft_ms_mean, points[k].ttft_ms_p50) for k in rows]


def _drawn(ratio: float, style: str) -> str:
    """How a row's lengths were drawn, for its label: nothing when fixed."""
    return "" if fixed_lengths(ratio, style) else f"drawn {style.replace('_', ' ')} them, ratio {ratio:g}"


def _span(what: str, values: np.ndarray, unit: str) -> str:
    """A group's label: the range its key spans ('prompts of 512-1024 tokens')."""
    return f"{what} {values.min():.0f}-{values.max():.0f} {unit} ({values.size} requests)"


def _arrivals(ms: np.ndarray) -> str:
    """A group's label by arrival: UTC clock times for stored requests ('arrivals 2026-12-07 14:08:01 to 14:10:32
    UTC (21 requests)'), seconds for a trace that starts near 0."""
    if ms.min() < EPOCH_MS:
        return _span("arrivals at", ms / 1000, "s")
    first, last = (dt.datetime.fromtimestamp(v / 1000, dt.UTC) for v in (ms.min(), ms.max()))
    end = last.strftime("%H:%M:%S" if last.date() == first.date() else "%Y-%m-%d %H:%M:%S")
    return f"arrivals {first:%Y-%m-%d %H:%M:%S} to {end} UTC ({ms.size} requests)"


def _log_residual(model: np.ndarray, observed: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.log(model / observed)
    return np.where(np.isfinite(r), r, MISS)


def calibration_requests(concurrency: int) -> int:
    """Requests per closed-loop row in a fit: enough for a few waves of clients past the warm-up."""
    return max(32, 4 * concurrency)


Evidence = tuple["Trace | None", "Bench | None"]


def kv_bound(spec: PoolSpec, rows: list[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
    """The (isl, osl, concurrency) rows whose clients together need more KV cache than one replica holds."""
    return [(isl, osl, c) for isl, osl, c in rows
            if min(c, spec.max_concurrency) * (isl + osl) > spec.kv_capacity_tokens]
