"""Calibration: fit each pool's step-model coefficients by minimizing the model's error, and say which the data fix.

Evidence is observed requests (obs_pool, obs_ttft_s, obs_e2e_s, optional obs_replica) and benchmark tables
(replay.benchtable). For trial coefficients the pool's observed requests are replayed on it with their observed
routing (policy `observed`), and each benchmark row is run closed-loop on one replica (replay.bench); the
residuals are the differences of mean log TTFT and TPOT of requests grouped by prompt length (and arrival time),
and of every row's TTFT and TPOT. Pools of one chip and engine share one set of coefficients (mfu, mem_bw_eff,
mfu_decode, step and per-sequence overhead, latency per collective hop), fitted together over all their rows:
the step model carries the differences between their layouts (TP degree, pipeline stages, experts), so a fit on
some TP degrees predicts the others. replay.fitting does the bounded least squares in log space from several
starts and reports for each coefficient whether the evidence identifies it. Queueing and batching are in the
model, so busy periods need not be avoided. A long trace is sampled as a few contiguous stretches, each replayed
after a warm-up whose requests are not scored, so the fit's cost does not grow with the trace. MAPE and R^2 of
TTFT and TPOT at the fitted values say how well the model explains the evidence.

A pool with no evidence of its own whose chip has none either can take the coefficients of a fitted group of
the same engine (`carry`): mfu and mem_bw_eff are shares of the datasheet's peak FLOP/s and bandwidth, the
overheads are the engine's own time, and the collective latency is the link's. What the datasheet gets wrong
(a chip's sustained share of its peak differs between generations) the carried fit cannot know, so its error is
at least the sibling's fit error, reported beside it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl
from scipy.optimize import minimize

from pool_registry import Registry
from replay.bench import closed_loop
from replay.candidate import Candidate
from replay.costmodel import Collectives, step_model
from replay.engine import prepare_traffic
from replay.exceptions import ReplayError
from replay.fitting import Coefficient, apply, fit, prior
from replay.fleet import PoolSpec, pools_by_id
from replay.hops import TypicalHop, typical_hop
from replay.plan import build_plan
from replay.policies import get_policy
from replay.simulator import simulate

STRETCHES = 5          # contiguous stretches sampled from a long trace
STRETCH = 400          # scored requests per stretch
WARMUP = 100           # requests replayed before each stretch and not scored
GAP_S = 3600.0         # idle time put between stretches so that they do not meet
MISS = 5.0             # residual of a request the trial model did not serve
EVALUATIONS = 240      # model runs per fit at most
OVERHEAD_SCAN_MS = (0.0, 1.0, 2.0, 3.0, 4.5, 6.0, 8.0, 11.0, 15.0, 20.0, 30.0, 45.0)
GROUPS = 24            # groups of similar prompts (and arrival times) compared by their mean log time
MIN_GROUP = 20


@dataclass(frozen=True)
class BenchCheck:
    """One benchmark row beside what the fitted model predicts for it (times in ms)."""

    pool: str
    isl: int
    osl: int
    concurrency: int
    ttft_ms: float
    ttft_ms_model: float
    tpot_ms: float
    tpot_ms_model: float


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
    seq_overhead_us: float | None = None
    collective_us: float | None = None
    mfu_decode: float | None = None
    serial_share: float | None = None
    coefficients: tuple[Coefficient, ...] = ()
    group: tuple[str, ...] = ()          # the pools fitted together (one chip and engine)
    checks: tuple[BenchCheck, ...] = ()
    carried_from: str | None = None      # the fitted pool whose coefficients a pool without evidence took

    def values(self) -> dict[str, float]:
        """The fitted coefficients a candidate takes."""
        return {k: v for k in FITTED if (v := getattr(self, k)) is not None}


FITTED = ("mfu", "mem_bw_eff", "mfu_decode", "step_overhead_ms", "seq_overhead_us", "collective_us", "serial_share")


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
        self.rows: list[tuple[int, int, int]] = rows.select("isl", "osl", "concurrency").rows()
        self.arrivals: list[str] = (rows["arrivals"].to_list() if "arrivals" in rows.columns
                                    else ["staggered"] * rows.height)
        self.prompts = rows["isl"].to_numpy().astype(float)
        self.obs_ttft = rows["ttft_ms"].to_numpy() / 1000
        self.obs_tpot = rows["tpot_ms"].to_numpy() / 1000

    def residuals(self, spec: PoolSpec) -> np.ndarray:
        """log(model / observed) of every row's TTFT and TPOT."""
        ttft, tpot = self.model(spec)
        return np.concatenate([_log_residual(ttft, self.obs_ttft), _log_residual(tpot, self.obs_tpot)])

    def model(self, spec: PoolSpec) -> tuple[np.ndarray, np.ndarray]:
        """Median TTFT and TPOT of every row on a trial pool."""
        points = [closed_loop(spec, c, isl, osl, calibration_requests(c), arrivals=a)
                  for (isl, osl, c), a in zip(self.rows, self.arrivals, strict=True)]
        return (np.array([p.ttft_ms_p50 for p in points]) / 1000,
                np.array([np.nan if p.tpot_ms_p50 is None else p.tpot_ms_p50 for p in points]) / 1000)


def _log_residual(model: np.ndarray, observed: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.log(model / observed)
    return np.where(np.isfinite(r), r, MISS)


def calibration_requests(concurrency: int) -> int:
    """Requests per closed-loop row in a fit: enough for a few waves of clients past the warm-up."""
    return max(32, 4 * concurrency)


Evidence = tuple["_Trace | None", "_Bench | None"]


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
    smooth = all(isinstance(part, _Bench) for _, part in parts)
    # a hop's latency adds hops x latency to every pass, as the engine's time per step adds itself: evidence from
    # one layout (one hop count) cannot tell the two apart, however many rows it has
    hops = {round(_hops(spec), 6) for spec, _ in parts}
    one_layout = len(hops) == 1 and min(hops) > 0
    values, report = fit(residuals, p, max_evaluations=EVALUATIONS * 4 if smooth else EVALUATIONS // 2, starts=[core],
                         smooth=smooth, collinear=("collective_us",) if one_layout else ())
    notes = [f"fitted {c.name} reached the bound {c.value:g}: the evidence is faster than the chip's peak"
             for c in report if c.status == "at bound" and c.name in ("mfu", "mem_bw_eff", "mfu_decode")]
    if typical is not None and any(c.name == "collective_us" and c.status != "fitted" for c in report):
        notes.append(_typical_note(specs[0], typical))
    group = tuple(s.id for s in specs)
    out = []
    for spec in specs:
        best = apply(spec, values)
        mine = [part for part in evidence[spec.id] if part is not None]
        trace = next((p for p in mine if isinstance(p, _Trace)), None)
        table = next((p for p in mine if isinstance(p, _Bench)), None)
        if not mine:
            out.append(_fit_of(spec, best, report, group, (), notes, None, None, carried=None))
            continue
        out.append(_fit_of(spec, best, report, group, mine, notes, trace, table, carried=None))
    return out


def undeclared_hop(spec: PoolSpec) -> TypicalHop | None:
    """The typical hop latency of the pool's link family when neither the pool nor its chip declares one."""
    if spec.collective_us is not None or spec.chip.interconnect.latency_us:
        return None
    return typical_hop(spec.chip.interconnect.kind)


def start_values(spec: PoolSpec) -> dict[str, float | None]:
    """What a fit starts from and keeps where the evidence says nothing: the registry's values, with the link
    family's typical hop latency where neither the pool nor its chip declares one."""
    p = prior(spec)
    typical = undeclared_hop(spec)
    if typical is not None:  # 0 would make every TP degree's all-reduces as quick to synchronize as one's
        p["collective_us"] = typical.hop_us
    return p


def _typical_note(spec: PoolSpec, typical: TypicalHop) -> str:
    link = spec.chip.interconnect.kind
    return (f"{spec.chip.id}'s interconnect ({link}) declares no latency per hop (interconnect.latency_us), and this "
            f"evidence cannot fit one: collective_us is {typical.family}'s typical {typical.hop_us:.3g} us "
            f"({typical.source}); declare the link's own to replace it")


def _hops(spec: PoolSpec) -> float:
    """The collective hops each pass of the pool waits for: its collectives' fixed time at 1 us a hop, in us."""
    return Collectives.of(apply(spec, {"collective_us": 1.0})).fixed_s * 1e6


def _fit_of(spec: PoolSpec, best: PoolSpec, report: list[Coefficient], group: tuple[str, ...],
            parts: list[_Trace | _Bench] | tuple[()], notes: list[str], trace: _Trace | None, table: _Bench | None,
            carried: str | None) -> PoolFit:
    """One pool's fit record at the group's coefficients."""
    models = [p.model(best) for p in parts]
    if models:
        ttft_mape, ttft_r2 = _errors(np.concatenate([m[0] for m in models]),
                                     np.concatenate([p.obs_ttft for p in parts]))
        tpot_mape, tpot_r2 = _errors(np.concatenate([m[1] for m in models]),
                                     np.concatenate([p.obs_tpot for p in parts]))
    else:
        ttft_mape = ttft_r2 = tpot_mape = tpot_r2 = None
    checks: tuple[BenchCheck, ...] = ()
    if table is not None:
        notes = [*notes, *_kv_note(spec, table.rows)]
        model_ttft, model_tpot = table.model(best)
        checks = tuple(BenchCheck(spec.id, isl, osl, c, float(t * 1000), float(mt * 1000), float(p * 1000),
                                  float(mp * 1000))
                       for (isl, osl, c), t, mt, p, mp in zip(table.rows, table.obs_ttft, model_ttft, table.obs_tpot,
                                                             model_tpot, strict=True))
    return PoolFit(pool=spec.id, n_ttft=int(trace.ttft_at.size) if trace else 0,
                   n_tpot=int(trace.tpot_at.size) if trace else 0, n_bench=len(table.rows) if table else 0,
                   mfu=best.mfu, mem_bw_eff=best.mem_bw_eff, step_overhead_ms=best.step_overhead_ms,
                   ttft_mape=ttft_mape, ttft_r2=ttft_r2, tpot_mape=tpot_mape, tpot_r2=tpot_r2, notes=tuple(notes),
                   seq_overhead_us=best.seq_overhead_us, collective_us=best.collective_us,
                   mfu_decode=best.mfu_decode, serial_share=best.serial_share, coefficients=tuple(report),
                   group=group, checks=checks,
                   carried_from=carried)


def kv_bound(spec: PoolSpec, rows: list[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
    """The (isl, osl, concurrency) rows whose clients together need more KV cache than one replica holds."""
    return [(isl, osl, c) for isl, osl, c in rows
            if min(c, spec.max_concurrency) * (isl + osl) > spec.kv_capacity_tokens]


def _kv_note(spec: PoolSpec, rows: list[tuple[int, int, int]]) -> list[str]:
    # past the cache the model queues admissions, and a median there jumps by whole passes as a coefficient
    # moves: such rows pin the coefficients less well than rows that fit, and can hold a search in a false valley
    bound = kv_bound(spec, rows)
    if not bound:
        return []
    isl, osl, c = bound[0]
    return [f"{len(bound)} of {len(rows)} benchmark rows of {spec.id} need more KV cache than a replica holds "
            f"(concurrency x (ISL + OSL) above {spec.kv_capacity_tokens} tokens, first: ISL {isl}, OSL {osl} at "
            f"concurrency {c}): there requests wait for the cache, and such rows pin the coefficients less well "
            "than rows that fit"]


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


def fit_pool(spec: PoolSpec, rows: pl.DataFrame | None, bench: pl.DataFrame | None) -> PoolFit:
    """Fit one pool alone from its observed requests and/or benchmark rows."""
    trace = _Trace(spec, rows) if rows is not None and rows.height else None
    table = _Bench(bench) if bench is not None and bench.height else None
    return fit_group([spec], {spec.id: (trace, table)})[0]


def calibrate(requests: pl.DataFrame | None, registry: Registry, *, bench: pl.DataFrame | None = None,
              base: Candidate | None = None, progress: Callable[[float, str], None] | None = None,
              carry: bool = False, pools: Collection[str] | None = None,
              ) -> tuple[tuple[PoolFit, ...], dict[str, int]]:
    """Fit every pool that has evidence (of `pools` alone when given), pools of one chip and engine together; also
    return counts of observed pools the fleet does not serve. `progress(share done, what)` hears of each group
    before its fit starts; pools without evidence take their chip and engine's fit, and with `carry` pools on chips
    without evidence a fitted pool's of the same engine."""
    observed = None
    if requests is not None:
        if "obs_pool" not in requests.columns or requests.filter(pl.col("obs_pool").is_not_null()).height == 0:
            raise ReplayError("no request has an observed pool (obs_pool), so there is nothing to calibrate")
        observed = requests.filter(pl.col("obs_pool").is_not_null())
    if observed is None and bench is None:
        raise ReplayError("nothing to calibrate from: give observed requests or a benchmark table")
    specs = pools_by_id(registry, base or Candidate(name="calibrate"))
    for pid in pools or ():
        if pid not in specs:
            raise ReplayError(f"unknown pool {pid!r} to calibrate; replayable: {', '.join(specs)}")
    unknown: dict[str, int] = {}
    by_pool: dict[str, pl.DataFrame] = {}
    unusable: dict[str, str] = {}
    if observed is not None:
        for (pool_id,), rows in observed.sort("arrival_ms").group_by("obs_pool", maintain_order=True):
            if str(pool_id) not in specs:
                unknown[str(pool_id)] = rows.height
            elif (why := _unusable(str(pool_id), rows)) is not None:
                unusable[str(pool_id)] = why
            else:
                by_pool[str(pool_id)] = rows
    tables: dict[str, pl.DataFrame] = {}
    if bench is not None:
        bad = bench.filter(~pl.col("pool").is_in(list(specs)))
        if bad.height:
            raise ReplayError(f"benchmark table line {bad['line'][0]}: column pool: unknown pool "
                              f"'{bad['pool'][0]}'; replayable: {', '.join(specs)}")
        tables = {str(k[0]): v for k, v in bench.group_by("pool", maintain_order=True)}
    if pools is not None:  # another pool's evidence is not this fit's, whatever chip it shares
        specs = {pid: spec for pid, spec in specs.items() if pid in pools}
    groups: dict[tuple[str, str], list[PoolSpec]] = {}
    for pid, spec in specs.items():
        if pid in by_pool or pid in tables:
            serving = registry.pool(pid).serving
            groups.setdefault((spec.chip.id, serving.engine if serving else ""), []).append(spec)
    if pools is not None and not groups and not any(p in unusable for p in specs):
        raise ReplayError(f"nothing to calibrate {', '.join(specs)} from: no observed requests and no benchmark "
                          "rows of these pools")
    fits = []
    for k, members in enumerate(groups.values()):
        if progress:
            progress(k / len(groups), f"fitting {', '.join(s.id for s in members)} ({k + 1} of {len(groups)})")
        evidence: dict[str, Evidence] = {}
        for spec in members:
            seen, bench_rows = by_pool.get(spec.id), tables.get(spec.id)
            evidence[spec.id] = (_Trace(spec, seen) if seen is not None and seen.height else None,
                                 _Bench(bench_rows) if bench_rows is not None and bench_rows.height else None)
        fits.extend(fit_group(members, evidence))
    fits.extend(carried(tuple(fits), registry, specs, chips=carry))
    fits = _say_unusable(fits, {p: why for p, why in unusable.items() if p in specs})
    if progress:
        progress(1.0, "done")
    return tuple(fits), unknown


def _unusable(pool_id: str, rows: pl.DataFrame) -> str | None:
    """Why a pool's observed requests cannot be fitted (too few served with a TTFT), or None."""
    ttft = pl.col("obs_ttft_s")
    has_ttft = ttft.is_not_null() & ttft.is_not_nan() & (ttft > 0)
    failed = (pl.col("outcome").fill_null("ok") != "ok") if "outcome" in rows.columns else pl.lit(False)
    ok, bad = rows.select(has_ttft.and_(~failed).sum(), failed.sum()).row(0)
    if ok >= MIN_GROUP:
        return None
    why = f"{bad} failed, {rows.height - bad - ok} without a TTFT"
    if not ok:
        return (f"none of the {rows.height} observed requests of {pool_id} can be fitted ({why}): pick a window "
                "where the pool served requests")
    return (f"only {ok} of the {rows.height} observed requests of {pool_id} can be fitted ({why}), fewer than the "
            f"{MIN_GROUP} a fit compares at least: pick a longer window")


def _say_unusable(fits: list[PoolFit], unusable: dict[str, str]) -> list[PoolFit]:
    """Put each pool's reason its requests were not fitted first in its notes, or in a line of its own."""
    out = [dataclasses.replace(f, notes=(unusable[f.pool], *f.notes)) if f.pool in unusable else f for f in fits]
    have = {f.pool for f in fits}
    return out + [PoolFit(pool=p, n_ttft=0, n_tpot=0, n_bench=0, mfu=None, mem_bw_eff=None, step_overhead_ms=None,
                          ttft_mape=None, ttft_r2=None, tpot_mape=None, tpot_r2=None, notes=(why,), group=(p,))
                  for p, why in unusable.items() if p not in have]


def carried(fits: tuple[PoolFit, ...], registry: Registry, specs: dict[str, PoolSpec],
            chips: bool = False) -> list[PoolFit]:
    """Fits for pools without evidence: their chip and engine's fit (another TP degree or model of a fitted
    group); with `chips`, on chips without any evidence, a fitted pool's of the same engine through the datasheets."""
    engine = {pid: s.engine for pid in specs if (s := registry.pool(pid).serving) is not None}
    by_group: dict[tuple[str, str], PoolFit] = {}
    by_engine: dict[str, PoolFit] = {}
    for f in fits:
        if f.mfu is None or f.pool not in engine:
            continue
        by_group.setdefault((specs[f.pool].chip.id, engine[f.pool]), f)
        known = by_engine.get(engine[f.pool])
        if known is None or (f.tpot_mape or 1.0) < (known.tpot_mape or 1.0):
            by_engine[engine[f.pool]] = f
    fitted_chips = {specs[f.pool].chip.id for f in fits if f.pool in specs}
    out = []
    have = {f.pool for f in fits}
    for pid, spec in specs.items():
        if pid in have or pid not in engine:
            continue
        src = by_group.get((spec.chip.id, engine[pid]))
        if src is not None:
            trust = _same_chip_trust(src, spec, specs)
            values = src.values()
        elif chips and spec.chip.id not in fitted_chips and engine[pid] in by_engine:
            src = by_engine[engine[pid]]
            values = src.values()
            if src.collective_us is not None and specs[src.pool].chip.interconnect.kind != spec.chip.interconnect.kind:
                values.pop("collective_us")  # another link: its own declared latency, else its family's
                if (typical := undeclared_hop(spec)) is not None:
                    values["collective_us"] = typical.hop_us
            trust = (f"carried from {src.pool} ({specs[src.pool].chip.id}, {engine[pid]}) through the datasheets: "
                     f"expect at least its fit error (TPOT MAPE {_pct(src.tpot_mape)}, TTFT MAPE "
                     f"{_pct(src.ttft_mape)}), more where this chip sustains another share of its peak; check it "
                     "with one benchmark row")
        else:
            continue
        best = apply(spec, values)
        out.append(dataclasses.replace(_fit_of(spec, best, list(src.coefficients), (pid,), (), [trust], None, None,
                                               carried=src.pool), n_ttft=0))
    return out


def _tp(spec: PoolSpec) -> int:
    return max(1, spec.devices_per_replica // max(1, spec.pp))


def _same_chip_trust(src: PoolFit, spec: PoolSpec, specs: dict[str, PoolSpec]) -> str:
    """How far a fit carried to another pool of its chip and engine is to be trusted, from what it was fitted on."""
    degrees = sorted({_tp(specs[p]) for p in src.group if p in specs})
    shown = ", ".join(f"TP{t}" for t in degrees)
    text = (f"carried from {src.pool} (the fit of {spec.chip.id} on this engine at {shown}) to TP{_tp(spec)}: "
            f"expect at least its fit error (TPOT MAPE {_pct(src.tpot_mape)}, TTFT MAPE {_pct(src.ttft_mape)})")
    # (a decode at the prefill's share of peak is the model without mfu_decode, not a registry figure)
    kept = [c.name for c in src.coefficients if c.status == "not identifiable" and c.value is not None]
    if _tp(spec) not in degrees and len(degrees) == 1:
        # at one degree the time that shrinks with TP and the time that does not add up the same way
        text += ("; fitted at one TP degree, it cannot tell time that does not shrink with TP (engine time per "
                 "step and per sequence, the link's hop latency) from work that does (a serial share of memory and "
                 "compute)")
        text += f", so {', '.join(kept)} kept the registry's value" if kept else ""
        text += _sequence_band(src, apply(spec, src.values()), degrees[0])
        text += f": check it with one benchmark row at TP{_tp(spec)}, or fit two TP degrees together"
    elif kept:
        text += f"; {', '.join(kept)} kept the registry's value (not identifiable from the fitted rows)"
    typical = undeclared_hop(spec)
    if _tp(spec) > 1 and typical is not None and src.collective_us == typical.hop_us:
        text += (f"; {spec.chip.id}'s interconnect declares no latency per hop (interconnect.latency_us), so "
                 f"TP{_tp(spec)}'s all-reduces pay {typical.family}'s typical {typical.hop_us:.3g} us a hop")
    elif _tp(spec) > 1 and not src.collective_us:
        text += (f"; {spec.chip.id}'s interconnect declares no latency per hop (interconnect.latency_us), so "
                 f"TP{_tp(spec)}'s all-reduces cost their bytes alone")
    return text


def sequence_time_as_work(spec: PoolSpec, from_tp: int, seqs: int, context: int) -> tuple[float, float]:
    """Seconds of one decode pass of `seqs` sequences of `context` tokens on a pool carried from TP `from_tp`: with
    its time per running sequence as engine time (as carried), and as work its TP spreads (times from_tp / TP)."""
    def one(pool: PoolSpec) -> float:
        return step_model(pool).pass_seconds(seqs, seqs, seqs * context, seqs, seqs * context)
    return one(spec), one(apply(spec, {"seq_overhead_us": spec.seq_overhead_us * from_tp / _tp(spec)}))


def _sequence_band(src: PoolFit, spec: PoolSpec, from_tp: int) -> str:
    """What the carried time per sequence would change at the largest batch the evidence ran, were it work."""
    if not spec.seq_overhead_us:
        return ""
    want, context = spec.max_concurrency, 1024  # a trace: a full batch of 1,024-token contexts
    if src.checks:
        row = max(src.checks, key=lambda c: (c.concurrency, c.isl + c.osl))
        want, context = row.concurrency, row.isl + row.osl // 2
    seqs = max(1, min(want, spec.max_concurrency, spec.kv_capacity_tokens // context))  # as far as the cache holds
    carried, work = sequence_time_as_work(spec, from_tp, seqs, context)
    change = work / carried - 1.0
    if abs(change) < 0.01:
        return ""
    return (f"; if its {spec.seq_overhead_us:.0f} us per running sequence is work that TP spreads, a decode pass "
            f"of {seqs} sequences of {context} tokens takes {work * 1e3:.1f} ms at TP{_tp(spec)} rather than "
            f"{carried * 1e3:.1f} ms ({change * 100:+.0f} %), and TPOT at that batch lies between the two")


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x * 100:.1f} %"


def calibrated_candidate(fits: tuple[PoolFit, ...], name: str = "calibrated",
                         base: dict[str, Any] | None = None) -> dict[str, Any]:
    """A candidate file body with the fitted coefficients (4 significant places) over a base candidate's body;
    without a base, one that replays the observed routing, to check the fit against what was observed."""
    body: dict[str, Any] = dict(base) if base else {"name": name, "policy": "observed"}
    body["name"] = name
    pools: dict[str, Any] = {k: dict(v) for k, v in body.get("pools", {}).items()}
    for f in fits:
        values = {k: float(f"{v:.4g}") for k, v in f.values().items()}
        if values:
            pools[f.pool] = {**pools.get(f.pool, {}), **values}
    body["pools"] = pools
    spreads = {f.pool: float(f"{x:.3g}") for f in fits if (x := step_time_spread(f)) is not None}
    if spreads:
        body["step_time_spread"] = {**body.get("step_time_spread", {}), **spreads}
    return body


THROUGHPUT = ("mfu", "mem_bw_eff", "mfu_decode")  # the coefficients a step's time is inversely proportional to


def step_time_spread(fit: PoolFit) -> float | None:
    """The error on a pool's step time as a factor: the largest spread of its fitted throughput coefficients (a
    step is bound by one of them, and its time scales with its inverse), None when none was fitted with one."""
    spreads = [c.spread for c in fit.coefficients if c.name in THROUGHPUT and c.status == "fitted"
               and c.spread is not None and c.spread <= 10.0]
    return max(spreads) if spreads else None
