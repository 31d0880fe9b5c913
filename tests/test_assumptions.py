"""What a step model assumes for want of registry fields: the compute format's peak and its bf16 fallback, an
estimated hidden size, and the sentence every output prints for each."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest

from pool_registry import Chip, Interconnect, Model, load_registry_text, registry_from_json, registry_to_json
from replay import Candidate
from replay.assumptions import assumptions, fleet_assumptions
from replay.costmodel import step_model
from replay.fleet import PoolSpec, pools_by_id
from tests.cli import run
from tests.conftest import REPO
from tests.replay_fleets import fleet, pool
from tests.test_loader import _swap

# NVIDIA H100 SXM5 datasheet: BF16 989, FP8 1979 TFLOPS dense. Huawei Ascend 910B3: BF16 313, no FP8 unit.
H100 = Chip(id="h100", vendor="nvidia", name="H100", peak_tflops_bf16=989.0, hbm_capacity_gb=80.0,
            hbm_bw_tbps=3.35, interconnect=Interconnect("nvlink4", 450.0, 2.13),
            supported_dtypes=("bf16", "fp8"), peak_tflops={"fp8": 1979.0})
ASCEND = Chip(id="910b", vendor="huawei", name="Ascend 910B3", peak_tflops_bf16=313.0, hbm_capacity_gb=64.0,
              hbm_bw_tbps=1.6, interconnect=Interconnect("hccs", 196.0), supported_dtypes=("bf16", "int8"))
# Llama 3.1 70B (config.json: 80 layers, hidden 8192, 64 attention and 8 KV heads, head_dim 128), FP8 weights
LLAMA_FP8 = Model(id="m", total_params_b=70.6, active_params_b=70.6, bytes_per_param=1.0, layers=80, kv_heads=8,
                  head_dim=128, max_context=131072, dtype="fp8", hidden_size=8192, attention_heads=64)


def spec_on(chip: Chip, model: Model, dpr: int = 4) -> PoolSpec:
    reg = fleet(pool("p", chip_id=chip.id, dpr=dpr, mfu=0.5), chips=(chip,), models=(model,))
    return pools_by_id(reg, Candidate(name="t"))["p"]


def test_compute_runs_at_the_peak_of_the_models_format() -> None:
    # FP8 weights compute in fp8 unless told otherwise: 2 x 70.6e9 FLOP / (1979e12 x 0.5 x 4) = 3.5675e-5 s a token
    fp8 = spec_on(H100, LLAMA_FP8)
    assert LLAMA_FP8.compute_format == "fp8"
    assert step_model(fp8).s_per_token == pytest.approx(141.2e9 / (1979e12 * 0.5 * 4), rel=1e-12)
    assert not [n for n in assumptions(fp8) if "peak" in n]
    # declared bf16 compute (weight-only FP8): 989 TFLOPS, twice the time
    bf16 = spec_on(H100, dataclasses.replace(LLAMA_FP8, compute_dtype="bf16"))
    assert step_model(bf16).s_per_token == pytest.approx(141.2e9 / (989e12 * 0.5 * 4), rel=1e-12)
    # int4 weights are widened to bf16 before their matmuls; fp16 runs at bf16's rate
    for dtype in ("int4", "fp16", None):
        assert dataclasses.replace(LLAMA_FP8, dtype=dtype).compute_format == "bf16"


def test_a_chip_without_the_formats_peak_computes_at_bf16_and_every_output_says_so() -> None:
    spec = spec_on(ASCEND, LLAMA_FP8)
    assert step_model(spec).s_per_token == pytest.approx(141.2e9 / (313e12 * 0.5 * 4), rel=1e-12)
    (note,) = [n for n in assumptions(spec) if "peak" in n]
    assert note == ("p: m computes in fp8, but 910b declares no fp8 peak (peak_tflops.fp8): compute runs at its "
                    "bf16 peak, 313 TFLOPS, so mfu holds the difference")


def test_a_hidden_size_is_estimated_from_parameters_and_layers_and_marked() -> None:
    # Llama 3.1 70B without its shape: sqrt(70.6e9 / (12 x 80)) = 8575.6 (config.json: 8192, +4.7 %)
    bare = dataclasses.replace(LLAMA_FP8, hidden_size=0, attention_heads=0)
    assert (bare.hidden, bare.hidden_estimated) == (8576, True)
    # DeepSeek-V3 (config.json: 61 layers, hidden 7168; 37B active): sqrt(37e9 / 732) = 7109.6, -0.8 %
    v3 = dataclasses.replace(bare, total_params_b=671.0, active_params_b=37.0, layers=61)
    assert v3.hidden == 7110
    # heads x head dim or the declared width are not estimates
    assert not dataclasses.replace(bare, attention_heads=64).hidden_estimated
    notes = assumptions(spec_on(H100, bare))
    assert ("p: m declares no hidden_size or attention_heads: its collectives move activations of an estimated "
            "hidden size 8576 (sqrt(active params / (12 x layers))); declare hidden_size from its config.json") in notes
    assert any(n.startswith("p: m declares no attention_heads: attention's compute over the context is off")
               for n in notes)
    # one device: no collective, so no word about the hidden size
    assert not [n for n in assumptions(spec_on(H100, bare, dpr=1)) if "hidden" in n]


def test_a_moe_model_without_expert_counts_and_a_link_without_latency_are_named() -> None:
    moe = dataclasses.replace(LLAMA_FP8, total_params_b=235.0, active_params_b=22.0)
    spec = spec_on(ASCEND, moe, dpr=8)
    notes = assumptions(spec)
    assert ("p: m declares no experts or experts_per_token: a batch's weight reads treat its inactive parameters as "
            "experts each picked with probability active / total (22B / 235B), under the pass's one roofline "
            "(the routed experts' own needs their counts)") in notes
    assert ("p: 910b's interconnect declares no latency per hop (interconnect.latency_us): TP8's all-reduces cost "
            "their bytes alone") in notes
    assert fleet_assumptions([spec, spec]) == notes  # each sentence once
    assert assumptions(spec_on(H100, LLAMA_FP8)) == ()


def test_peaks_per_format_load_and_round_trip() -> None:
    text = _swap("    peak_tflops_bf16: 989\n", "    peak_tflops: {bf16: 989, fp8: 1979}\n")
    reg = load_registry_text(text)
    chip = reg.chip("h100")
    assert (chip.peak_tflops_bf16, chip.peak("fp8"), chip.peak("fp4")) == (989, 1979, None)
    assert chip.compute_peak("fp4") == (989, True) and chip.compute_peak("fp8") == (1979, False)
    assert registry_from_json(registry_to_json(reg)) == reg
    both = load_registry_text(_swap("    peak_tflops_bf16: 989\n",
                                    "    peak_tflops_bf16: 989\n    peak_tflops: {bf16: 989, fp8: 1979}\n"))
    assert both.chip("h100") == chip
    declared = load_registry_text(_swap("    head_dim: 128\n", "    head_dim: 128\n    compute_dtype: fp8\n"))
    assert declared.model("m70").compute_format == "fp8"
    assert registry_from_json(registry_to_json(declared)) == declared


def test_bench_and_plan_print_the_fallback_and_calibrate_keeps_it(capsys: pytest.CaptureFixture[str],
                                                                   tmp_path: Path) -> None:
    # the example fleet with Llama 3.1 70B in FP8, and a Gaudi 3 whose datasheet figure for FP8 was left out
    text = (REPO / "examples" / "fleet.yaml").read_text().replace(
        "    dtype: bf16\n    requires: {vllm:", "    dtype: fp8\n    requires: {vllm:", 1).replace(
        "peak_tflops: {bf16: 1835, fp8: 1835}", "peak_tflops_bf16: 1835")
    path = tmp_path / "fleet.yaml"
    path.write_text(text)
    shutil.copytree(REPO / "examples" / "onboarding", tmp_path / "onboarding")
    db = str(tmp_path / "h.duckdb")
    assert run(capsys, "--db", db, "registry", "load", str(path))[0] == 0
    fallback = ("note: gaudi3-a: llama-3.1-70b computes in fp8, but gaudi3 declares no fp8 peak "
                "(peak_tflops.fp8): compute runs at its bf16 peak, 1835 TFLOPS, so mfu holds the difference")
    code, out, _ = run(capsys, "--db", db, "replay", "bench", "--pool", "gaudi3-a", "--concurrency", "1", "--isl",
                       "128", "--osl", "8", "--requests", "4")
    assert code == 0 and fallback in out.splitlines()
    code, out, _ = run(capsys, "--db", db, "replay", "bench", "--pool", "h100-a", "--concurrency", "1", "--isl",
                       "128", "--osl", "8", "--requests", "4")
    assert code == 0 and "declares no fp8 peak" not in out
    code, out, _ = run(capsys, "--db", db, "plan", "--model", "llama-3.1-70b", "--pool", "gaudi3-a",
                       "--concurrency", "8")
    assert fallback in out.splitlines()
