"""Calibration: fit each pool's mfu, mem_bw_eff and step overhead by minimizing the model's error.

Evidence is observed requests (obs_pool, obs_ttft_s, obs_e2e_s, optional obs_replica) and benchmark tables
(replay.benchtable). For a trial (mfu, mem_bw_eff, step_overhead_ms) the pool's observed requests are replayed
on it with their observed routing (policy `observed`), and each benchmark row is run closed-loop on one
replica (replay.bench); the residuals are the differences of mean log TTFT and TPOT of requests grouped by
prompt length (and arrival time), and of every row's TTFT and TPOT, and a Nelder-Mead search
(scipy.optimize.minimize) minimizes their squares. Queueing and batching are in the model, so busy periods need
not be avoided. A long trace is sampled as a few contiguous stretches, each
replayed after a warm-up whose requests are not scored, so the fit's cost does not grow with the trace.
MAPE and R^2 of TTFT and TPOT at the fitted values say how well the model explains the evidence.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl
from scipy.optimize import minimize

from pool_registry import Registry
from replay.bench import closed_loop, default_requests
from replay.config import Candidate
from replay.costmodel import StepModel
from replay.engine import prepare_traffic
from replay.errors import ReplayError
from replay.fleet import PoolSpec, resolve_pools
from replay.plan import build_plan
from replay.policies import get_policy
from replay.simulator import simulate

STRETCHES = 5          # contiguous stretches sampled from a long trace
STRETCH = 400          # scored requests per stretch
WARMUP = 100           # requests replayed before each stretch and not scored
GAP_S = 3600.0         # idle time put between stretches so that they do not meet
MISS = 5.0             # residual of a request the trial model did not serve
LOWER = np.array([1.0, 1.0, 0.0])      # mfu and mem_bw_eff at most 1, overhead at least 0
UPPER = np.array([100.0, 100.0, 50.0])
EVALUATIONS = 80       # model runs per fit at most
GROUPS = 24            # groups of similar prompts (and arrival times) compared by their mean log time
MIN_GROUP = 20
OVERHEAD_SCAN_MS = (0.0, 1.0, 2.0, 3.0, 4.5, 6.0, 8.0, 11.0, 15.0, 20.0, 30.0, 45.0)


@dataclass(frozen=True)
class PoolFit:
    """Fitted coefficients of one pool and how well they explain its observations."""

    pool: str
    n_ttft: int
    n_tpot: int
    n_bench: int
    mfu: float | None
    mem_bw_eff: float | None
    step_overhead_ms: float | None
    ttft_mape: float | None
    ttft_r2: float | None
    tpot_mape: float | None
    tpot_r2: float | None
    notes: tuple[str, ...] = ()


def _errors(model: np.ndarray, observed: np.ndarray) -> tuple[float | None, float | None]:
    """MAPE and R^2 of model against observed values."""
    keep = np.isfinite(model) & np.isfinite(observed) & (observed > 0)
    m, o = model[keep], observed[keep]
    if o.size == 0:
        return None, None
    mape = float(np.mean(np.abs(m - o) / o))
    ss_tot = float(np.sum((o - o.mean()) ** 2))
    return mape, (1.0 - float(np.sum((o - m) ** 2)) / ss_tot if ss_tot > 0 else None)


def sample_stretches(rows: pl.DataFrame) -> pl.DataFrame:
    """The rows to replay: all of them when few, else a few contiguous stretches with warm-ups, spread out in
    time and pulled together with idle gaps between; `scored` marks the requests whose errors count."""
    n = rows.height
    if "seq" not in rows.columns:
        rows = rows.with_row_index("seq").with_columns(pl.col("seq").cast(pl.Int64))
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
    if key.size == 0:
        return []
    edges = np.unique(np.quantile(key, np.linspace(0, 1, count + 1)[1:-1]))
    which = np.searchsorted(edges, key, side="right")
    return [idx for g in range(edges.size + 1) if (idx := np.flatnonzero(which == g)).size >= MIN_GROUP]


def _log_means(values: np.ndarray, groups: list[np.ndarray]) -> np.ndarray:
    """Mean log value per group: multiplicative noise that is symmetric in log leaves it unbiased."""
    with np.errstate(divide="ignore", invalid="ignore"):
        logs = np.log(values)
    return np.array([np.mean(logs[g]) for g in groups])


class _Trace:
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
        self.tpot_groups = _groups(prompt[self.tpot_at], GROUPS) + _groups(arrival[self.tpot_at], GROUPS)
        self.obs_ttft_means = _log_means(self.obs_ttft, self.ttft_groups)
        self.obs_tpot_means = _log_means(self.obs_tpot, self.tpot_groups)

    def model(self, spec: PoolSpec) -> tuple[np.ndarray, np.ndarray]:
        """Model TTFT and TPOT of the scored requests on a trial pool."""
        raw = simulate(dataclasses.replace(self.plan, pools=(spec,)), self.policy, {}, "queue")
        tpot = (raw.e2e - raw.ttft) / np.maximum(self.out - 1, 1)
        return raw.ttft[self.ttft_at], tpot[self.tpot_at]

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


class _Bench:
    """Benchmark rows of one pool, run closed-loop on trial coefficients."""

    def __init__(self, rows: pl.DataFrame) -> None:
        self.rows = rows.select("isl", "osl", "concurrency").rows()
        self.obs_ttft = rows["ttft_ms"].to_numpy() / 1000
        self.obs_tpot = rows["tpot_ms"].to_numpy() / 1000

    def residuals(self, spec: PoolSpec) -> np.ndarray:
        """log(model / observed) of every row's TTFT and TPOT."""
        ttft, tpot = self.model(spec)
        return np.concatenate([_log_residual(ttft, self.obs_ttft), _log_residual(tpot, self.obs_tpot)])

    def model(self, spec: PoolSpec) -> tuple[np.ndarray, np.ndarray]:
        """Median TTFT and TPOT of every row on a trial pool."""
        points = [closed_loop(spec, c, isl, osl, default_requests(c)) for isl, osl, c in self.rows]
        return (np.array([p.ttft_ms_p50 for p in points]) / 1000,
                np.array([np.nan if p.tpot_ms_p50 is None else p.tpot_ms_p50 for p in points]) / 1000)


def _log_residual(model: np.ndarray, observed: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.log(model / observed)
    return np.where(np.isfinite(r), r, MISS)


def _trial(spec: PoolSpec, x: np.ndarray) -> PoolSpec:
    return dataclasses.replace(spec, mfu=float(1.0 / x[0]), mem_bw_eff=float(1.0 / x[1]),
                               step_overhead_ms=float(10.0 * x[2]))


def typical_prompt(trace: _Trace | None, table: _Bench | None) -> float:
    """The median uncached prompt of the evidence, at least one token."""
    prompts = []
    if trace is not None:
        prompts.append(trace.prompts)
    if table is not None:
        prompts.append(np.array([isl for isl, _, _ in table.rows], dtype=float))
    return max(1.0, float(np.median(np.concatenate(prompts)))) if prompts else 1.0


def fit_pool(spec: PoolSpec, rows: pl.DataFrame | None, bench: pl.DataFrame | None) -> PoolFit:
    """Fit one pool from its observed requests and/or benchmark rows."""
    parts: list[_Trace | _Bench] = []
    trace = _Trace(spec, rows) if rows is not None and rows.height else None
    table = _Bench(bench) if bench is not None and bench.height else None
    parts = [p for p in (trace, table) if p is not None]
    n_ttft = int(trace.ttft_at.size) if trace else 0
    n_tpot = int(trace.tpot_at.size) if trace else 0
    n_bench = len(table.rows) if table else 0
    if n_ttft + n_bench == 0:
        return PoolFit(spec.id, 0, 0, 0, None, None, None, None, None, None, None,
                       ("no usable observations (need obs_ttft_s on requests that completed, or benchmark rows)",))

    def residuals(x: np.ndarray) -> np.ndarray:
        trial = _trial(spec, x)
        return np.concatenate([part.residuals(trial) for part in parts])

    # Searched as x = (log of a typical prompt's prefill pass, log of a lone decode pass, overhead in 10 ms),
    # both passes including the overhead: the evidence pins those two passes down tightly, while the
    # overhead's share of them shows only in how times change with prompt length and batch. In mfu,
    # mem_bw_eff and overhead the same trade-off is a long, narrow, diagonal valley with a rough floor
    # (events reorder), where searches stall; here it lies along one axis.
    step = StepModel.of(dataclasses.replace(spec, mfu=1.0, mem_bw_eff=1.0, step_overhead_ms=0.0))
    prompt = typical_prompt(trace, table)
    unit_prefill, unit_decode = prompt * step.s_per_token, step.weight_bytes_read(1.0) * step.s_per_byte

    def coefficients(x: np.ndarray) -> tuple[float, float, float] | None:
        o = max(0.0, 10.0 * x[2]) / 1000.0
        prefill, decode = np.exp(x[0]) - o, np.exp(x[1]) - o
        if prefill <= 0 or decode <= 0:
            return None
        mfu, eff = unit_prefill / prefill, unit_decode / decode
        return (mfu, eff, o * 1000.0) if 0.0 < mfu <= 1.0 and 0.0 < eff <= 1.0 else None

    def cost(x: np.ndarray) -> float:
        c = coefficients(x)
        if c is None:
            return float("inf")
        r = residuals(np.array([1.0 / c[0], 1.0 / c[1], c[2] / 10.0]))
        return float(r @ r)

    o0 = spec.step_overhead_ms / 1000.0
    x0 = np.array([np.log(unit_prefill / spec.mfu + o0), np.log(unit_decode / spec.mem_bw_eff + o0),
                   spec.step_overhead_ms / 10.0])
    # the two passes first, then the overhead by a scan along the valley, then all three together
    passes = minimize(lambda y: cost(np.array([y[0], y[1], x0[2]])), x0[:2], method="Nelder-Mead", options={
        "initial_simplex": x0[:2] + np.array([[0, 0], [0.2, 0], [0, 0.2]]), "xatol": 2e-3,
        "fatol": 1e-12, "maxfev": EVALUATIONS // 3})
    scan = [np.array([*passes.x, o / 10.0]) for o in OVERHEAD_SCAN_MS]
    start = min(scan, key=cost)
    found = minimize(cost, start, method="Nelder-Mead", options={
        "initial_simplex": start + np.array([[0, 0, 0], [0.05, 0, 0], [0, 0.05, 0], [0, 0, 0.1]]),
        "xatol": 1e-3, "fatol": 1e-12, "maxfev": EVALUATIONS})
    c = coefficients(found.x) or (spec.mfu, spec.mem_bw_eff, spec.step_overhead_ms)
    fit = np.array([1.0 / c[0], 1.0 / c[1], c[2] / 10.0])
    best = _trial(spec, fit)
    notes = []
    for name, value in (("mfu", best.mfu), ("mem_bw_eff", best.mem_bw_eff)):
        if value > 0.99:
            notes.append(f"fitted {name} reached the bound 1: the observations are faster than the chip's peak")
    model_ttft = np.concatenate([p.model(best)[0] for p in parts])
    model_tpot = np.concatenate([p.model(best)[1] for p in parts])
    obs_ttft = np.concatenate([p.obs_ttft for p in parts])
    obs_tpot = np.concatenate([p.obs_tpot for p in parts])
    ttft_mape, ttft_r2 = _errors(model_ttft, obs_ttft)
    tpot_mape, tpot_r2 = _errors(model_tpot, obs_tpot)
    return PoolFit(pool=spec.id, n_ttft=n_ttft, n_tpot=n_tpot, n_bench=n_bench, mfu=best.mfu,
                   mem_bw_eff=best.mem_bw_eff, step_overhead_ms=best.step_overhead_ms, ttft_mape=ttft_mape,
                   ttft_r2=ttft_r2, tpot_mape=tpot_mape, tpot_r2=tpot_r2, notes=tuple(notes))


def calibrate(requests: pl.DataFrame | None, registry: Registry, *, bench: pl.DataFrame | None = None,
              base: Candidate | None = None, progress: Callable[[float, str], None] | None = None,
              ) -> tuple[tuple[PoolFit, ...], dict[str, int]]:
    """Fit every pool that has evidence; also return counts of observed pools the fleet does not serve.
    `progress(share done, what)` hears of each pool before its fit starts."""
    observed = None
    if requests is not None:
        if "obs_pool" not in requests.columns or requests.filter(pl.col("obs_pool").is_not_null()).height == 0:
            raise ReplayError("no request has an observed pool (obs_pool), so there is nothing to calibrate")
        observed = requests.filter(pl.col("obs_pool").is_not_null())
    if observed is None and bench is None:
        raise ReplayError("nothing to calibrate from: give observed requests or a benchmark table")
    specs = {s.id: s for s in resolve_pools(registry, base or Candidate(name="calibrate"))}
    unknown: dict[str, int] = {}
    by_pool: dict[str, pl.DataFrame] = {}
    if observed is not None:
        for (pool_id,), rows in observed.sort("arrival_ms").group_by("obs_pool", maintain_order=True):
            if str(pool_id) in specs:
                by_pool[str(pool_id)] = rows
            else:
                unknown[str(pool_id)] = rows.height
    tables: dict[str, pl.DataFrame] = {}
    if bench is not None:
        bad = bench.filter(~pl.col("pool").is_in(list(specs)))
        if bad.height:
            raise ReplayError(f"benchmark table line {bad['line'][0]}: column pool: unknown pool "
                              f"'{bad['pool'][0]}'; replayable: {', '.join(specs)}")
        tables = {str(k[0]): v for k, v in bench.group_by("pool", maintain_order=True)}
    todo = [(pid, spec) for pid, spec in specs.items() if pid in by_pool or pid in tables]
    fits = []
    for k, (pid, spec) in enumerate(todo):
        if progress:
            progress(k / len(todo), f"fitting {pid} ({k + 1} of {len(todo)})")
        fits.append(fit_pool(spec, by_pool.get(pid), tables.get(pid)))
    if progress:
        progress(1.0, "done")
    return tuple(fits), unknown


def calibrated_candidate(fits: tuple[PoolFit, ...], name: str = "calibrated",
                         base: dict[str, Any] | None = None) -> dict[str, Any]:
    """A candidate file body with the fitted coefficients (4 significant places) over a base candidate's body;
    without a base, one that replays the observed routing, to check the fit against what was observed."""
    body: dict[str, Any] = dict(base) if base else {"name": name, "policy": "observed"}
    body["name"] = name
    pools: dict[str, Any] = {k: dict(v) for k, v in body.get("pools", {}).items()}
    for f in fits:
        values = {k: float(f"{v:.4g}") for k, v in (("mfu", f.mfu), ("mem_bw_eff", f.mem_bw_eff),
                                                     ("step_overhead_ms", f.step_overhead_ms)) if v is not None}
        if values:
            pools[f.pool] = {**pools.get(f.pool, {}), **values}
    body["pools"] = pools
    return body
