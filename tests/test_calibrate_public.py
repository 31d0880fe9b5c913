"""Calibration against public measured serving benchmarks: fit on part of a published table, predict the rest.

Issue 19's targets, on data nobody planted: one TP degree's fit carried to another TP degree of the same chip and
model (TPOT median absolute percentage error <= 10 %, TTFT <= 20 %); a chip never calibrated on, from its
datasheet and a sibling chip's fit (<= 16 %); a large MoE model on a non-NVIDIA stack calibrated on half of its
concurrency levels (TPOT <= 15 %, TTFT <= 25 % on the other half). Where the model misses, the case is a strict
xfail whose reason gives the measured error; docs/validation.md has every figure and what misses where.

The figures below are small hand-written excerpts of the published tables, each with its source. The registry
the tests write holds the chips' datasheet figures and the models' shapes from their config files; the only other
input is each link's latency per collective hop, from a published all-reduce microbenchmark ([C]), never from
the serving tables themselves.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
import yaml

from app.cli import main
from pool_registry import Registry, load_registry
from replay import Candidate, PoolOverride, calibrate, closed_loop, parse_bench_table, run_replay
from replay.calibrate import FITTED, calibration_requests, sequence_time_as_work, start_values
from replay.fitting import NAMES, STATUSES, Coefficient, apply, fit
from replay.fleet import PoolSpec, pools_by_id

# A target the model misses: the test states the target, the reason the measured error and why.
MISS = pytest.mark.xfail(strict=True, raises=AssertionError)

# -- [A] one chip and model at two TP degrees --------------------------------------------------------------------
# dstack, "Llama3.1-405B-Fp8 Inference Performance Comparison between 8xH100SXM5 and 8xMi300x" (November 2024),
# https://github.com/dstackai/benchmarks/tree/main/comparison/h100sxm5_vs_mi300x, csv_data/throughput_latency_curve.csv
# (commit 85a2fe1), rows "4xMi300x 1FP8-amd" (TP4) and "8xMi300x 1FP8-amd" (TP8): vLLM 0.6.3 on ROCm 6.2, AMD's
# FP8 (weights and KV cache) Llama 3.1 405B Instruct, vLLM's benchmark_throughput: N requests of 128 prompt and
# 2048 output tokens run as one batch, and the seconds the batch took. The table has no TTFT, so only TPOT is
# checked here: the batch's time / 2048 (its one prefill of N x 128 tokens is under 1 % of it at these N).
ISL_A, OSL_A = 128, 2048
BATCH_S = {
    4: {4: 94.174, 8: 97.839, 16: 101.502, 32: 113.730, 64: 136.939, 128: 195.526, 256: 431.616},
    8: {4: 67.791, 8: 68.698, 16: 73.067, 32: 81.624, 64: 99.368, 128: 131.636, 256: 227.288},
}
# TP4 at 256 is left out of the fit: it loses output throughput against 128 (the source's own 2048/2048 TP4 rows
# do the same from 128 on), a change of regime at TP4 only, which no coefficient of one straight line carries.
FIT_A = (4, 8, 16, 32, 64, 128)

# -- [B] a large MoE model on a non-NVIDIA stack, and the same model on an NVIDIA chip -----------------------------
# dstack, "DeepSeek R1 inference performance: MI300X vs. H200" (2025-03-18),
# https://dstack.ai/blog/h200-mi300x-deepskeek-benchmark, data in https://github.com/dstackai/benchmarks,
# Deepseek-R1/raw_data/online_results.csv (commit 7f37e66): SGLang's bench_serving, random dataset, 3200 prompt and
# 800 output tokens at range ratio 1 (fixed lengths), 500 prompts, --max-concurrency c, DeepSeek-R1 (FP8) on one
# 8-GPU node at TP8. (concurrency, median TTFT ms, median TPOT ms), backend sglang:
ISL_B, OSL_B = 3200, 800
DSR1 = {
    "dsr1-mi300x": ((4, 1607.04, 34.898), (8, 2806.25, 38.212), (16, 3983.54, 47.363), (32, 7589.85, 59.428),
                    (64, 13916.92, 84.532), (128, 27298.96, 135.929)),
    "dsr1-h200": ((4, 3556.21, 43.148), (8, 3967.20, 43.485), (16, 7882.92, 50.905), (32, 12904.80, 61.186),
                  (64, 22600.89, 76.498), (128, 37422.92, 108.353)),
}
FIT_B = (4, 16, 64)      # half of the concurrency levels; 8, 32 and 128 are held out

# -- [C] a hop's latency on each link -----------------------------------------------------------------------------
# Azure AI benchmarking guide, results of ND MI300X v5 and ND H200 v5 (2024-2025),
# https://github.com/samuel-bohman/AI-benchmarking-guide (a fork of Azure/AI-benchmarking-guide),
# Azure_Results/ND_MI300X_v5_results.md and ND_H200_v5_results.md: RCCL / NCCL AllReduce bus bandwidth of a 1 KB
# message over 8 GPUs, 0.04 and 0.06 GB/s. A 1 KB all-reduce is all latency; the ring's 2(n - 1) steps move it in
# size x 2(n - 1) / (busbw x n) seconds, so one step (the cost model's hop) takes size / (busbw x n).
ALLREDUCE_1K_BUSBW_GBPS = {"mi300x": 0.04, "h200": 0.06}


def hop_us(chip: str, n: int = 8, size: float = 1024.0) -> float:
    """Microseconds per ring step of an all-reduce, from a tiny message's bus bandwidth."""
    return size / (ALLREDUCE_1K_BUSBW_GBPS[chip] * 1e9 * n) * 1e6


def registry_yaml(link_latency: bool = True) -> str:
    """The fleet the tests calibrate: datasheet chips, the models' shapes, one pool per benchmarked layout."""
    mi, h2 = (f", latency_us: {hop_us('mi300x'):.2f}", f", latency_us: {hop_us('h200'):.2f}") if link_latency \
        else ("", "")
    pools = []
    for pid, chip, model, devices, engine, conc, budget in (
            ("mi300x-tp4", "mi300x", "llama-3.1-405b-fp8", 4, "vllm", 256, 16384),
            ("mi300x-tp8", "mi300x", "llama-3.1-405b-fp8", 8, "vllm", 256, 16384),
            ("dsr1-mi300x", "mi300x", "deepseek-r1", 8, "sglang", 128, 8192),
            ("dsr1-h200", "h200", "deepseek-r1", 8, "sglang", 128, 8192)):
        schedule = "prefill_first" if engine == "sglang" else "decode_first"  # SGLang runs waiting prompts first
        pools.append(f"""
  - id: {pid}
    chip: {chip}
    devices: {devices}
    devices_per_node: {devices}
    hourly_cost_per_device: 2.0
    exporter: test
    assign: {{node_pattern: "{pid}-*"}}
    serving: {{model: {model}, engine: {engine}, schedule: {schedule}, replicas: 1,
               devices_per_replica: {devices}, max_concurrency: {conc}, max_num_batched_tokens: {budget}}}
    cost_model: {{mfu: 0.35, mem_bw_eff: 0.65}}""")
    # The starting cost model is the example fleet's MI300X pool's; engine overheads start at 0. SGLang's default
    # chunked prefill is 8192 tokens; vLLM 0.6.3 on ROCm ran without chunked prefill (a step of 16384 is enough).
    return f"""version: 1
name: public-benchmarks
chips:
  # AMD Instinct MI300X data sheet: BF16 1307.4 TFLOPS dense, 192 GB HBM3 at 5.3 TB/s, Infinity Fabric
  # 896 GB/s peer-to-peer aggregate (448 GB/s each way).
  - id: mi300x
    vendor: amd
    peak_tflops_bf16: 1307.4
    hbm_capacity_gb: 192
    hbm_bw_tbps: 5.3
    interconnect: {{kind: infinity_fabric, bw_gbps: 448{mi}}}
    supported_dtypes: [bf16, fp16, fp8]
  # NVIDIA H200 (SXM) data sheet: BF16 989 TFLOPS dense, 141 GB HBM3e at 4.8 TB/s, NVLink 900 GB/s (450 each way).
  - id: h200
    vendor: nvidia
    peak_tflops_bf16: 989
    hbm_capacity_gb: 141
    hbm_bw_tbps: 4.8
    interconnect: {{kind: nvlink4, bw_gbps: 450{h2}}}
    supported_dtypes: [bf16, fp16, fp8]
models:
  # Llama 3.1 405B config.json: 126 layers, hidden 16384, 128 heads, 8 KV heads of 128; FP8 weights and KV cache.
  - id: llama-3.1-405b-fp8
    total_params_b: 405.8
    active_params_b: 405.8
    bytes_per_param: 1
    kv_bytes_per_elem: 1
    layers: 126
    kv_heads: 8
    head_dim: 128
    hidden_size: 16384
    attention_heads: 128
    max_context: 131072
  # DeepSeek-R1 config.json: 61 layers, hidden 7168, 128 heads, 256 routed experts of which 8 per token, 671B
  # parameters of which 37B active, FP8 weights. Multi-head latent attention caches one latent of 512 + 64
  # (kv_lora_rank + qk_rope_head_dim) per layer and token, in bf16: one KV head of 288 for each of its K and V.
  - id: deepseek-r1
    total_params_b: 671
    active_params_b: 37
    bytes_per_param: 1
    layers: 61
    kv_heads: 1
    head_dim: 288
    hidden_size: 7168
    attention_heads: 128
    experts: 256
    experts_per_token: 8
    max_context: 163840
pools:{"".join(pools)}
"""


@pytest.fixture(scope="module")
def registry_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The registry with each link's measured hop latency."""
    path = tmp_path_factory.mktemp("public") / "fleet.yaml"
    path.write_text(registry_yaml())
    return path


def specs_of(reg: Registry, overrides: dict[str, dict[str, float]] | None = None) -> dict[str, PoolSpec]:
    """The registry's pools, with coefficient overrides per pool."""
    pools = {p: PoolOverride(**v) for p, v in (overrides or {}).items()}  # type: ignore[arg-type]
    return pools_by_id(reg, Candidate(name="public", pools=pools))


def mdape(model: list[float], measured: list[float]) -> float:
    """Median absolute percentage error of model against measured values (a share: 0.1 is 10 %)."""
    return float(np.median([abs(m / o - 1.0) for m, o in zip(model, measured, strict=True)]))


@dataclass(frozen=True)
class Carry:
    """A fit on some rows and its predictions for the others."""

    report: tuple[Coefficient, ...]
    values: dict[str, float | None]
    errors: dict[str, dict[int, tuple[float | None, float]]]  # pool -> concurrency -> (TTFT, TPOT) model / measured - 1

    def status(self, name: str) -> Coefficient:
        """The fit's report of one coefficient."""
        return next(c for c in self.report if c.name == name)

    def tpot(self, pool: str, concurrencies: tuple[int, ...] | None = None) -> float:
        """Median absolute TPOT error of a pool's rows (all of them, or these concurrencies)."""
        rows = self.errors[pool]
        return float(np.median([abs(rows[c][1]) for c in (concurrencies or tuple(rows))]))

    def ttft(self, pool: str, concurrencies: tuple[int, ...] | None = None) -> float:
        """Median absolute TTFT error of a pool's rows."""
        rows = self.errors[pool]
        return float(np.median([abs(e) for c in (concurrencies or tuple(rows)) if (e := rows[c][0]) is not None]))


def tpot_fit(spec: PoolSpec, rows: list[tuple[int, int, int, float]]) -> tuple[dict[str, float | None],
                                                                                tuple[Coefficient, ...]]:
    """The project's bounded log-space fit (replay.fitting) on TPOT alone: log(model / measured) of every row
    (isl, osl, concurrency, tpot_ms), each run closed-loop as `replay calibrate --bench` runs its rows. For tables
    without TTFT, and to see what TPOT alone makes of the coefficients."""
    def residuals(values: dict[str, float | None]) -> np.ndarray:
        trial = apply(spec, values)
        return np.array([math.log((closed_loop(trial, c, isl, osl, calibration_requests(c)).tpot_ms_p50 or math.inf)
                                  / tpot) for isl, osl, c, tpot in rows])
    # one TP degree each: a hop's latency and the engine's time per pass are one constant, as `replay calibrate`
    # at one layout knows
    values, report = fit(residuals, start_values(spec), smooth=True, max_evaluations=400, collinear=("collective_us",))
    return values, tuple(report)


def errors_of(spec: PoolSpec, rows: tuple[tuple[int, float | None, float], ...], isl: int, osl: int,
              requests: Callable[[int], int] = calibration_requests,
              arrivals: str = "staggered") -> dict[int, tuple[float | None, float]]:
    """(TTFT, TPOT) model / measured - 1 of each (concurrency, ttft_ms or None, tpot_ms) row, run closed-loop."""
    out: dict[int, tuple[float | None, float]] = {}
    for c, ttft, tpot in rows:
        p = closed_loop(spec, c, isl, osl, requests(c), arrivals=arrivals)
        assert p.tpot_ms_p50 is not None
        out[c] = (None if ttft is None else p.ttft_ms_p50 / ttft - 1.0, p.tpot_ms_p50 / tpot - 1.0)
    return out


def tp_carry(reg: Registry) -> Carry:
    """[A]: fit the TP4 pool's TPOT, predict both pools' rows with the TP4 coefficients."""
    specs = specs_of(reg)
    tpot = {tp: {c: s * 1000.0 / OSL_A for c, s in rows.items()} for tp, rows in BATCH_S.items()}
    values, report = tpot_fit(specs["mi300x-tp4"], [(ISL_A, OSL_A, c, tpot[4][c]) for c in FIT_A])
    errors = {}
    for tp in (4, 8):
        spec = apply(specs[f"mi300x-tp{tp}"], values)
        errors[f"mi300x-tp{tp}"] = errors_of(spec, tuple((c, None, t) for c, t in tpot[tp].items()), ISL_A, OSL_A)
    return Carry(report, values, errors)


# -- [A] TP4 -> TP8 -------------------------------------------------------------------------------------------------

# Every fit replays its rows closed-loop a few hundred times: each case takes tens of seconds (marked slow).

@pytest.fixture(scope="module")
def tp(registry_file: Path) -> Carry:
    return tp_carry(load_registry(registry_file))


@pytest.mark.slow
def test_a_tp4_fit_predicts_tp8_tpot(tp: Carry) -> None:
    """Fitted on TP4 alone, the step model predicts TP8's TPOT: what does not shrink with TP (the all-reduces'
    hops at the link's measured latency) carries, and the hop latency, which one TP degree cannot tell from the
    engine's time per step, stays the link's figure."""
    assert tp.tpot("mi300x-tp4", FIT_A) < 0.02  # the fit explains what it was fitted on
    hop = tp.status("collective_us")
    assert hop.status == "not identifiable" and hop.value == pytest.approx(hop_us("mi300x"), abs=0.01)
    for c in tp.report:
        assert c.status in STATUSES
    assert tp.tpot("mi300x-tp8") <= 0.10, tp.errors["mi300x-tp8"]


@pytest.mark.slow
@MISS(reason="TP8 TPOT at concurrency 128 and 256 comes out +18.8 % and +26.9 % from the "
             "TP4 fit: at one TP degree the time that grows with the batch is fitted as seq_overhead_us "
             "(272 us per running sequence per step), which carries to TP8 unchanged, while the work it "
             "stands for (compute the weights' streaming does not hide) is spread over twice the devices there; "
             "the serial share that says so is not identifiable from these batches at one degree (over both "
             "degrees it is, and TP8 at 256 comes within 2 %: the test above)")
def test_a_tp8_high_concurrency_within_target(tp: Carry) -> None:
    assert max(abs(tp.errors["mi300x-tp8"][c][1]) for c in (128, 256)) <= 0.10, tp.errors["mi300x-tp8"]


@pytest.mark.slow
def test_a_what_one_degree_cannot_say_brackets_the_measured_tp8(tp: Carry, registry_file: Path) -> None:
    """The carried pool's note says how much faster TP8 would be were TP4's time per sequence work that TP8
    spreads: measured TP8 lies between that and the carried model (from -4 % against a bracket of -10 % at N = 32
    to -21 % against -25 % at N = 256)."""
    spec = apply(specs_of(load_registry(registry_file))["mi300x-tp8"], tp.values)
    for n in (32, 64, 128, 256):
        as_engine, as_work = sequence_time_as_work(spec, 4, n, ISL_A + OSL_A // 2)
        measured = 1.0 / (1.0 + tp.errors["mi300x-tp8"][n][1])  # measured over the carried model
        assert as_work / as_engine < measured < 1.0, (n, as_work / as_engine, measured)


@pytest.mark.slow
def test_a_without_a_declared_hop_latency_the_link_familys_carries(tmp_path: Path) -> None:
    """Links that declare no latency: the fit keeps Infinity Fabric's typical hop (the measured figure the registry
    above declares), so TP4's fit carries to TP8 as well. A link of a family nobody measured keeps 0: TP4's fixed
    time then all goes to terms that scale with TP, and TP8 comes out far too fast at low concurrency. The hop
    latency is what carries."""
    path = tmp_path / "fleet.yaml"
    path.write_text(registry_yaml(link_latency=False))
    carry = tp_carry(load_registry(path))
    hop = carry.status("collective_us")
    assert hop.status == "not identifiable" and hop.value == pytest.approx(hop_us("mi300x"))
    assert carry.tpot("mi300x-tp8") <= 0.10, carry.errors["mi300x-tp8"]
    path.write_text(registry_yaml(link_latency=False).replace("kind: infinity_fabric", "kind: custom_fabric"))
    carry = tp_carry(load_registry(path))
    assert carry.status("collective_us").value == 0.0
    assert carry.tpot("mi300x-tp4", FIT_A) < 0.02
    assert carry.tpot("mi300x-tp8") > 0.15
    assert all(carry.errors["mi300x-tp8"][c][1] < -0.15 for c in (4, 8, 16))


# -- [A] both TP degrees, two prompt lengths: one set of coefficients, and twice the batch ------------------------
# The same source's csv_data/throughput_latency_curve_2048_2048.csv (commit 85a2fe1): 2048 prompt and 2048 output
# tokens, rows "4xMi300x 1FP8-amd" (TP4) and "8xMi300x-amd-Llama-31-405B-Instruct-FP8-KV" (TP8, the same FP8
# weights and KV cache): seconds per batch of N. With 2048-token prompts the batch's prefill is a visible part of
# it, so the rows are fitted as they ran: N requests arriving together, the batch's seconds against the model's
# makespan. TP4 at N = 128 and 256 (2048 / 2048) and 256 (128 / 2048) lose throughput against smaller batches, the
# regime change above, and stay out.
BATCH_2048_S = {
    4: {4: 97.156, 8: 103.199, 16: 114.707, 32: 138.412, 64: 185.564},
    8: {4: 68.380, 8: 70.539, 16: 78.698, 32: 96.357, 64: 125.357, 128: 186.832, 256: 334.495},
}
BOTH_FIT = {(4, 128): (4, 8, 16, 32, 64, 128), (4, 2048): (4, 8, 16, 32, 64),
            (8, 128): (4, 8, 16, 32, 64, 128), (8, 2048): (4, 8, 16, 32, 64, 128)}


def batch_seconds(reg: Registry, spec: PoolSpec, n: int, isl: int, osl: int = 2048) -> float:
    """The model's makespan of a batch of n requests arriving together on one replica of the pool."""
    traffic = pl.DataFrame({"arrival_ms": [0] * n, "in_tokens": [isl] * n, "out_tokens": [osl] * n})
    values = {k: v for k in NAMES if (v := getattr(spec, k)) is not None}
    pools = {p.id: PoolOverride(enabled=False) for p in reg.pools if p.serving and p.id != spec.id}
    pools[spec.id] = PoolOverride(**values, max_concurrency=n)  # type: ignore[arg-type]
    return float(run_replay(Candidate(name="batch", pools=pools), traffic, reg, 0).requests["e2e_s"].max())


@pytest.fixture(scope="module")
def both_degrees(registry_file: Path) -> Carry:
    """[A]: one fit over both TP degrees and both prompt lengths, N up to 128; every row predicted."""
    reg = load_registry(registry_file)
    specs = specs_of(reg)
    measured = {(tp, 128): BATCH_S[tp] for tp in (4, 8)} | {(tp, 2048): BATCH_2048_S[tp] for tp in (4, 8)}

    def residuals(values: dict[str, float | None]) -> np.ndarray:
        return np.array([math.log(batch_seconds(reg, apply(specs[f"mi300x-tp{tp}"], values), n, isl)
                                  / measured[tp, isl][n]) for (tp, isl), ns in BOTH_FIT.items() for n in ns])
    values, report = fit(residuals, start_values(specs["mi300x-tp4"]), smooth=True, max_evaluations=400)
    errors = {f"tp{tp}-{isl}": {n: (None, batch_seconds(reg, apply(specs[f"mi300x-tp{tp}"], values), n, isl) / s - 1)
                                for n, s in rows.items()} for (tp, isl), rows in measured.items()}
    return Carry(tuple(report), values, errors)


@pytest.mark.slow
def test_a_both_tp_degrees_fit_one_serial_share_that_carries_to_twice_the_batch(both_degrees: Carry) -> None:
    """Fitted over TP4 and TP8 together, the roofline's max(memory, compute) misses its own rows by up to 5 % and
    TP8 at N = 256 by +15 % and +8 %: the time that grows with the batch shrinks with TP, below the ridge point.
    A serial share of the shorter of memory and compute (about half) explains every row within 3 % with a prefill
    at a physical share of peak, and carries to twice the batch at TP8."""
    share = both_degrees.status("serial_share")
    assert share.status == "fitted" and 0.3 < share.value < 0.7, share.describe()  # type: ignore[operator]
    assert 0.35 < (both_degrees.values["mfu"] or 0.0) < 0.7  # the 2048-token prompts' prefill pins it
    for key, ns in (("tp4-128", BOTH_FIT[4, 128]), ("tp4-2048", BOTH_FIT[4, 2048]), ("tp8-128", BOTH_FIT[8, 128]),
                    ("tp8-2048", BOTH_FIT[8, 2048])):
        assert both_degrees.tpot(key, ns) < 0.02, both_degrees.errors[key]
    assert abs(both_degrees.errors["tp8-128"][256][1]) < 0.05 and abs(both_degrees.errors["tp8-2048"][256][1]) < 0.05


# -- [B] DeepSeek-R1 on MI300X (SGLang), half of the concurrency levels, through the CLI ----------------------------

@contextlib.contextmanager
def _quiet() -> Iterator[tuple[io.StringIO, io.StringIO]]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        yield out, err


def cli(*argv: str) -> tuple[int, str, str]:
    """`hetpool *argv` in-process, as tests/cli.py runs it, for module fixtures (which cannot take capsys)."""
    with _quiet() as (out, err):
        try:
            code = main(list(argv))
        except SystemExit as exc:
            code = int(exc.code or 0)
    return code, out.getvalue(), err.getvalue()


def bench_csv(pool: str, rows: tuple[tuple[int, float, float], ...], arrivals: str = "") -> str:
    """A `replay calibrate --bench` table of (concurrency, ttft_ms, tpot_ms) rows at [B]'s lengths."""
    if arrivals:
        return "pool,isl,osl,concurrency,ttft_ms,tpot_ms,arrivals\n" + "".join(
            f"{pool},{ISL_B},{OSL_B},{c},{t},{p},{arrivals}\n" for c, t, p in rows)
    return "pool,isl,osl,concurrency,ttft_ms,tpot_ms\n" + "".join(
        f"{pool},{ISL_B},{OSL_B},{c},{t},{p}\n" for c, t, p in rows)


@dataclass(frozen=True)
class CliRun:
    """`replay calibrate --bench` on [B]'s fitting half and `replay bench` at the held-out concurrencies."""

    calibrate: tuple[int, str, str]
    fits: list[dict[str, Any]]    # the calibrate command's --json fits
    bench: tuple[int, str, str]
    errors: dict[int, tuple[float, float]]  # held-out concurrency -> (TTFT, TPOT) model / measured - 1


def moe_cli(registry: Path, work: Path, arrivals: str = "") -> CliRun:
    """Load the registry, fit the MI300X pool on [B]'s FIT_B rows, benchmark the others as the source did
    (`arrivals` given: the table says how its clients arrived, and `replay bench` runs them so)."""
    db = str(work / "hetpool.duckdb")
    assert cli("--db", db, "registry", "load", str(registry))[0] == 0
    rows = DSR1["dsr1-mi300x"]
    table = work / "bench.csv"
    table.write_text(bench_csv("dsr1-mi300x", tuple(r for r in rows if r[0] in FIT_B), arrivals))
    out_file = work / "fit.yaml"
    calibrated = cli("--db", db, "replay", "calibrate", "--no-requests", "--bench", str(table), "--out", str(out_file),
                     "--json")
    fits = json.loads(calibrated[1])["fits"] if calibrated[0] == 0 else []
    held = [r for r in rows if r[0] not in FIT_B]
    # 500 prompts at each concurrency, as the source ran them
    bench = cli("--db", db, "replay", "bench", "--pool", "dsr1-mi300x", "--concurrency",
                ",".join(str(r[0]) for r in held), "--isl", str(ISL_B), "--osl", str(OSL_B), "--num-prompts", "500",
                "--candidate", str(out_file), *(("--arrivals", arrivals) if arrivals else ()), "--json")
    points = {p["concurrency"]: p for p in json.loads(bench[1])} if bench[0] == 0 else {}
    errors = {c: (points[c]["ttft_ms_p50"] / t - 1.0, points[c]["tpot_ms_p50"] / p - 1.0)
              for c, t, p in held if c in points}
    return CliRun(calibrated, fits, bench, errors)


@pytest.fixture(scope="module")
def moe(registry_file: Path, tmp_path_factory: pytest.TempPathFactory) -> CliRun:
    return moe_cli(registry_file, tmp_path_factory.mktemp("moe"))


@pytest.mark.slow
def test_b_the_cli_fits_the_half_and_benchmarks_the_rest(moe: CliRun) -> None:
    code, _, err = moe.calibrate
    assert code == 0, err
    (fit_row,) = moe.fits
    assert fit_row["pool"] == "dsr1-mi300x" and fit_row["n_bench"] == len(FIT_B)
    assert {c["name"] for c in fit_row["coefficients"]} == set(FITTED)
    assert all(c["status"] in STATUSES for c in fit_row["coefficients"])
    assert moe.bench[0] == 0, moe.bench[2]
    assert sorted(moe.errors) == [8, 32, 128]


# The benchmark's fixed lengths keep its clients in lockstep waves: each wave's c prompts arrive together and are
# prefilled one after another, so measured TTFT grows as about c/2 prefills (1.6 s at 4, 27 s at 128, p99 twice
# the median). `replay bench` and calibration spread the clients over the cycle, where TTFT is about one prefill.
LOCKSTEP = ("the source's fixed-length closed loop runs in lockstep waves (TTFT ~ c/2 prefills: 1.6 s at c=4, "
            "27 s at c=128), while the replay's closed loop spreads its clients (TTFT ~ a decode pass and one prefill)")


@pytest.mark.slow
@MISS(reason="held-out c=8, 32, 128 via `replay calibrate --bench` + `replay bench`: TTFT "
             "+1 %, -62 %, -89 % (median 62 %), TPOT +7 %, +154 %, +331 % (median 154 %); " + LOCKSTEP + "; "
             "to meet the fitted TTFT rows the fit takes mfu 0.0095 (1 % of peak), and the decode steps that "
             "chunked prefill shares with such slow prompts make TPOT grow with c far faster than measured")
def test_b_moe_half_concurrency_carries(moe: CliRun) -> None:
    """Issue 19: TPOT <= 15 % and TTFT <= 25 % (median absolute percentage error) on the held-out half."""
    ttft = float(np.median([abs(e[0]) for e in moe.errors.values()]))
    tpot = float(np.median([abs(e[1]) for e in moe.errors.values()]))
    assert tpot <= 0.15 and ttft <= 0.25, moe.errors


@pytest.fixture(scope="module")
def moe_lockstep(registry_file: Path, tmp_path_factory: pytest.TempPathFactory) -> CliRun:
    return moe_cli(registry_file, tmp_path_factory.mktemp("moe_lockstep"), "lockstep")


@pytest.mark.slow
def test_b_moe_half_concurrency_carries_replayed_in_lockstep(moe_lockstep: CliRun) -> None:
    """Issue 19's [B] targets with the benchmark's arrival pattern given to calibration and `replay bench`, and
    SGLang's schedule in the registry (schedule: prefill_first): a wave's prompts all run before its decoders go
    on, so the wave finishes and comes back together as on the measured server. Held-out c = 8, 32, 128: TTFT
    -22 %, +2 %, +1 % (median 2 %), TPOT +4 %, +6 %, -19 % (median 6 %). Decode-first, the same fit missed by a
    median 44 % and 47 %: its waves broke up."""
    assert moe_lockstep.calibrate[0] == 0 and moe_lockstep.bench[0] == 0, moe_lockstep.calibrate[2]
    assert sorted(moe_lockstep.errors) == [8, 32, 128]
    ttft = float(np.median([abs(e[0]) for e in moe_lockstep.errors.values()]))
    tpot = float(np.median([abs(e[1]) for e in moe_lockstep.errors.values()]))
    assert tpot <= 0.15 and ttft <= 0.25, moe_lockstep.errors


@pytest.fixture(scope="module")
def moe_tpot(registry_file: Path) -> Carry:
    """[B] on the MI300X pool fitted on TPOT alone (replay.fitting), the held-out half predicted."""
    specs = specs_of(load_registry(registry_file))
    rows = DSR1["dsr1-mi300x"]
    values, report = tpot_fit(specs["dsr1-mi300x"], [(ISL_B, OSL_B, c, p) for c, _, p in rows if c in FIT_B])
    spec = apply(specs["dsr1-mi300x"], values)
    return Carry(report, values, {"dsr1-mi300x": errors_of(spec, rows, ISL_B, OSL_B)})


@pytest.mark.slow
def test_b_tpot_alone_carries_across_concurrency(moe_tpot: Carry) -> None:
    """Fitted on TPOT alone, the held-out half's TPOT is within the target: the batch dependence of a decode
    step is in the model. The coefficients it takes are not the chip's (see docs/validation.md)."""
    held = tuple(c for c, _, _ in DSR1["dsr1-mi300x"] if c not in FIT_B)
    assert moe_tpot.tpot("dsr1-mi300x", FIT_B) < 0.02
    assert moe_tpot.tpot("dsr1-mi300x", held) <= 0.15, moe_tpot.errors


@pytest.mark.slow
@MISS(reason="held-out TTFT of the TPOT fit -86 %, -95 %, -98 % (median 95 %): " + LOCKSTEP)
def test_b_ttft_of_a_fixed_length_benchmark(moe_tpot: Carry) -> None:
    held = tuple(c for c, _, _ in DSR1["dsr1-mi300x"] if c not in FIT_B)
    assert moe_tpot.ttft("dsr1-mi300x", held) <= 0.25, moe_tpot.errors


def one_wave(reg: Registry, values: dict[str, float | None], c: int) -> float:
    """Median TTFT in ms of one lockstep wave: c requests of [B]'s lengths arriving together at the MI300X pool."""
    others = {p.id: PoolOverride(enabled=False) for p in reg.pools if p.id != "dsr1-mi300x"}
    fitted = PoolOverride(**{k: v for k, v in values.items() if v is not None})  # type: ignore[arg-type]
    wave = pl.DataFrame({"arrival_ms": np.zeros(c, dtype=np.int64), "in_tokens": np.full(c, ISL_B),
                         "out_tokens": np.full(c, OSL_B)})
    result = run_replay(Candidate(name="wave", policy="round_robin", pools={**others, "dsr1-mi300x": fitted}),
                        wave, reg, 0)
    return float(np.median(result.requests["ttft_s"].to_numpy())) * 1000.0


@pytest.mark.slow
def test_b_one_lockstep_wave_has_the_measured_ttft(moe_tpot: Carry, registry_file: Path) -> None:
    """TTFT's growth with c is the benchmark's arrival pattern: replaying one wave as it ran (c requests arriving
    together) with the TPOT-fitted coefficients, TTFT, never fitted, lands within the target (-38 %, -19 %, -18 %
    at c = 8, 32, 128). Its level rests on the prefill rate a TPOT fit implies; on the same source's vLLM rows it
    comes out 35-54 % low (docs/validation.md)."""
    reg = load_registry(registry_file)
    held = [(c, t) for c, t, _ in DSR1["dsr1-mi300x"] if c not in FIT_B]
    assert mdape([one_wave(reg, moe_tpot.values, c) for c, _ in held], [t for _, t in held]) <= 0.25

# -- [C] a chip never calibrated on: H200's fit carried to MI300X through the datasheets ----------------------------

@pytest.fixture(scope="module")
def chip_carry(registry_file: Path) -> Carry:
    """`calibrate --carry` on [B]'s H200 rows as they ran (lockstep): the MI300X pool, without evidence, takes the
    H200 fit, and its rows are replayed the same way."""
    reg = load_registry(registry_file)
    table = parse_bench_table(bench_csv("dsr1-h200", DSR1["dsr1-h200"], "lockstep"))
    fits, _ = calibrate(None, reg, bench=table, carry=True)
    got = {f.pool: f for f in fits}
    mi = got["dsr1-mi300x"]
    assert mi.carried_from == "dsr1-h200"
    errors = {}
    for pool, fitted in (("dsr1-h200", got["dsr1-h200"]), ("dsr1-mi300x", mi)):
        spec = specs_of(reg, {pool: fitted.values()})[pool]
        errors[pool] = errors_of(spec, DSR1[pool], ISL_B, OSL_B, arrivals="lockstep")
    return Carry(got["dsr1-h200"].coefficients, dict(mi.values()), errors)


@pytest.mark.slow
def test_c_h200_fit_carries_to_mi300x_tpot(chip_carry: Carry) -> None:
    """Issue 19's <= 16 % for a chip never calibrated on: H200's lockstep fit (its own rows: TTFT 6.8 %, TPOT
    7.9 %), carried through the datasheets, gives MI300X's TPOT within 9.4 % over c = 4..128 (+14 % .. -17 %)."""
    assert chip_carry.tpot("dsr1-h200") <= 0.10 and chip_carry.ttft("dsr1-h200") <= 0.10, chip_carry.errors
    assert chip_carry.status("mfu").status == "fitted"
    assert chip_carry.tpot("dsr1-mi300x") <= 0.16, chip_carry.errors


@pytest.mark.slow
@MISS(reason="MI300X TTFT from H200's lockstep fit via `calibrate --carry`: +15 %, +2 %, +44 %, +33 %, +34 %, "
             "+34 % at c = 4..128 (median 33.5 %): measured H200 TTFT is 2.2, 1.4, 2.0, 1.7, 1.6, 1.4x MI300X's, "
             "where the datasheets' peak FLOP/s say 1.32x (the two stacks' prefill kernels), and the H200 fit "
             "misses its own TTFT rows by up to -33 % (at c = 4)")
def test_c_h200_fit_carries_to_mi300x_ttft(chip_carry: Carry) -> None:
    assert chip_carry.ttft("dsr1-mi300x") <= 0.16, chip_carry.errors


@pytest.fixture(scope="module")
def chip_carry_tpot(registry_file: Path) -> Carry:
    """The same carry fitted on H200's TPOT alone; the hop latency stays each link's own (another kind of link)."""
    specs = specs_of(load_registry(registry_file))
    values, report = tpot_fit(specs["dsr1-h200"], [(ISL_B, OSL_B, c, p) for c, _, p in DSR1["dsr1-h200"]])
    carried = {k: v for k, v in values.items() if k != "collective_us"}
    spec = apply(specs["dsr1-mi300x"], carried)
    return Carry(report, carried, {"dsr1-mi300x": errors_of(spec, DSR1["dsr1-mi300x"], ISL_B, OSL_B)})


@pytest.mark.slow
def test_c_h200_tpot_fit_carries_to_mi300x(chip_carry_tpot: Carry) -> None:
    """MI300X TPOT from H200's TPOT fit within the 16 % target, by a hair: median 15.9 % (+23 %, +20 %, +8 %, +1 %,
    -12 %, -28 % at c=4..128; 16.2 % while the replay split the latent's one KV head over TP8 instead of keeping it
    whole on every device). The shape still misses: H200's fit pins mem_bw_eff at its bound 1.0 and puts its fixed
    time per step in step_overhead_ms, which carries as engine time; the MI300X stack has less fixed time per step
    and more time per running sequence (TPOT x3.9 from c=4 to 128, H200 x2.5), which no datasheet says."""
    assert chip_carry_tpot.tpot("dsr1-mi300x") <= 0.16, chip_carry_tpot.errors


def test_the_registry_is_the_datasheets(registry_file: Path) -> None:
    """The written registry loads, and its derived figures are the datasheets' and config files' (by hand)."""
    reg = load_registry(registry_file)
    specs = specs_of(reg)
    # MLA: 61 layers x 576 bf16 values per token
    assert specs["dsr1-mi300x"].kv_bytes_per_token == 61 * 576 * 2
    # Llama 3.1 405B in FP8: 126 layers x 2 x 8 x 128 one-byte values per token
    assert specs["mi300x-tp8"].kv_bytes_per_token == 126 * 2 * 8 * 128
    assert hop_us("mi300x") == pytest.approx(3.2) and hop_us("h200") == pytest.approx(2.133, abs=1e-3)
    assert yaml.safe_load(registry_file.read_text())["chips"][0]["interconnect"]["latency_us"] == 3.2
