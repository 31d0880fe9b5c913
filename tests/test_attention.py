"""Attention as models build it: MLA's latent KV, GQA's heads, layers that keep no growing KV; the KV size, the
attention compute and the memory the planner and the replay count follow the declared kind. Goldens from the
models' public config.json figures, named at each."""

from __future__ import annotations

import dataclasses

import pytest

from pool_registry import Chip, Interconnect, Model, RegistryError, load_registry_text
from replay import Candidate
from replay.costmodel import step_model
from replay.fleet import pools_by_id
from replay.planner.memory import Engine, kv_bytes_per_token_per_device
from tests.replay_fleets import fleet, pool
from tests.test_loader import _swap

# DeepSeek-V3 / R1 config.json: num_hidden_layers 61, hidden_size 7168, num_attention_heads 128, kv_lora_rank 512,
# qk_rope_head_dim 64 (qk_nope_head_dim 128, v_head_dim 128); 671B parameters, 37B active, FP8 weights
DEEPSEEK_V3 = Model(id="deepseek-v3", total_params_b=671.0, active_params_b=37.0, bytes_per_param=1.0, layers=61,
                    kv_heads=128, head_dim=128, max_context=163840, hidden_size=7168, attention_heads=128,
                    experts=256, experts_per_token=8, kv_lora_rank=512, qk_rope_head_dim=64, dtype="fp8")
# gpt-oss-120b config.json: num_hidden_layers 36 alternating sliding_attention (window 128) and full_attention,
# num_attention_heads 64, num_key_value_heads 8, head_dim 64
GPT_OSS_120B = Model(id="gpt-oss-120b", total_params_b=117.0, active_params_b=5.1, bytes_per_param=0.5, layers=36,
                     kv_heads=8, head_dim=64, max_context=131072, hidden_size=2880, attention_heads=64,
                     full_attention_layers=18)
# Qwen3-Next-80B-A3B config.json: num_hidden_layers 48, full_attention_interval 4 (the rest Gated DeltaNet, linear
# attention with a fixed state), num_attention_heads 16, num_key_value_heads 2, head_dim 256
QWEN3_NEXT = Model(id="qwen3-next-80b-a3b", total_params_b=80.0, active_params_b=3.0, bytes_per_param=2.0,
                   layers=48, kv_heads=2, head_dim=256, max_context=262144, hidden_size=2048, attention_heads=16,
                   full_attention_layers=12)
# NVIDIA H200 SXM datasheet: 141 GB HBM3e at 4.8 TB/s, BF16 989 TFLOPS dense, FP8 1979
H200 = Chip(id="h200", vendor="nvidia", name="H200", peak_tflops_bf16=989.0, hbm_capacity_gb=141.0, hbm_bw_tbps=4.8,
            interconnect=Interconnect("nvlink4", 450.0, 2.13), supported_dtypes=("bf16", "fp8"),
            peak_tflops={"fp8": 1979.0})


def test_mla_keeps_a_latent_per_token_and_layer() -> None:
    m = DEEPSEEK_V3
    assert m.mla and m.kv_layers == 61
    # 61 layers x (512 + 64) x 2 B = 70,272 B a token, where K and V of 128 heads of 128 would be 3,997,696 B
    assert m.kv_bytes_per_token == 61 * 576 * 2 == 70_272
    assert dataclasses.replace(m, kv_lora_rank=0, qk_rope_head_dim=0).kv_bytes_per_token == 2 * 61 * 128 * 128 * 2
    # absorbed attention: 2 x 128 heads x (2 x 512 + 64) FLOPs a layer per context token, 61 layers
    assert m.attention_flops == 2 * 61 * 128 * (2 * 512 + 64) == 16_990_208


def test_layers_without_a_growing_kv_neither_hold_nor_attend_to_the_context() -> None:
    # gpt-oss-120b: 18 full-attention layers x K and V x 8 heads x 64 x 2 B; 4 x 64 heads x 64 FLOPs a layer
    assert GPT_OSS_120B.kv_bytes_per_token == 2 * 18 * 8 * 64 * 2 == 36_864
    assert GPT_OSS_120B.attention_flops == 4 * 18 * 64 * 64 == 294_912
    # Qwen3-Next: 12 of 48 layers keep a KV: 2 x 12 x 2 heads x 256 x 2 B
    assert QWEN3_NEXT.kv_bytes_per_token == 2 * 12 * 2 * 256 * 2 == 24_576
    assert dataclasses.replace(QWEN3_NEXT, full_attention_layers=0).kv_bytes_per_token == 4 * 24_576


def test_the_replica_holds_and_reads_a_latent_per_device_and_attends_at_bf16() -> None:
    reg = fleet(pool("r1", chip_id="h200", model_id="deepseek-v3", dpr=8, mfu=0.4, eff=0.7), chips=(H200,),
                models=(DEEPSEEK_V3,))
    spec = pools_by_id(reg, Candidate(name="t"))["r1"]
    assert spec.kv_bytes_per_token == 70_272                  # one copy, what a transfer moves
    assert spec.kv_bytes_held_per_token == 8 * 70_272         # every device of TP8 keeps the whole latent
    # (8 x 141 GB x 0.9 - 671 GB of FP8 weights) / 562,176 B
    assert spec.kv_capacity_tokens == int((8 * 141e9 * 0.9 - 671e9) // (8 * 70_272))
    step = step_model(spec)
    assert step.kv_bytes == 8 * 70_272
    # attention over the context at the bf16 peak: 16,990,208 / (989e12 x 0.4 x 8) a context product
    assert step.s_per_ctx == pytest.approx(16_990_208 / (989e12 * 0.4 * 8), rel=1e-12)
    # the matmuls at FP8's: 2 x 37e9 / (1979e12 x 0.4 x 8)
    assert step.s_per_token == pytest.approx(74e9 / (1979e12 * 0.4 * 8), rel=1e-12)
    # the planner's device: the latent whole (by stage), where GQA splits its heads
    assert kv_bytes_per_token_per_device(DEEPSEEK_V3, Engine(), 8, 1) == 70_272
    assert kv_bytes_per_token_per_device(DEEPSEEK_V3, Engine(), 8, 2) == 70_272 / 2
    assert kv_bytes_per_token_per_device(GPT_OSS_120B, Engine(), 8, 1) == 36_864 / 8


def test_gqa_heads_fewer_than_the_tp_group_are_replicated_in_the_replay_and_the_planner_alike() -> None:
    """Qwen3-Next-80B-A3B (above): 2 KV heads of 256 over its 12 full-attention layers, 2 x 2 x 256 x 12 x 2 B =
    24,576 B a token, one copy. At TP8 each device keeps one head (vLLM and SGLang replicate a KV head rather than
    split it): 4 copies in the group, one head's 2 x 256 x 12 x 2 B = 12,288 B a device; at TP2, one head a device
    and one copy."""
    reg = fleet(pool("q8", chip_id="h200", model_id=QWEN3_NEXT.id, dpr=8), pool("q2", chip_id="h200",
                model_id=QWEN3_NEXT.id, dpr=2), chips=(H200,), models=(QWEN3_NEXT,))
    specs = pools_by_id(reg, Candidate(name="t"))
    assert specs["q8"].kv_bytes_per_token == specs["q2"].kv_bytes_per_token == 24_576
    assert (specs["q8"].kv_bytes_held_per_token, specs["q2"].kv_bytes_held_per_token) == (4 * 24_576, 24_576)
    assert step_model(specs["q8"]).kv_bytes == 4 * 24_576  # each device reads its own head's copy every pass
    # the planner's device is the replay's replica over its devices, at every TP degree
    for tp in (1, 2, 4, 8):
        assert kv_bytes_per_token_per_device(QWEN3_NEXT, Engine(), tp, 1) == 24_576 * max(1, tp / 2) / tp
    assert kv_bytes_per_token_per_device(QWEN3_NEXT, Engine(), 8, 1) == 12_288
    assert kv_bytes_per_token_per_device(QWEN3_NEXT, Engine(kv_cache_dtype="fp8"), 8, 2) == 12_288 / 2 / 2


def test_attention_fields_load_and_are_checked() -> None:
    text = _swap("    head_dim: 128\n", "    head_dim: 128\n    kv_lora_rank: 512\n    qk_rope_head_dim: 64\n"
                                      "    full_attention_layers: 40\n")
    m = load_registry_text(text).model("m70")
    assert (m.mla, m.kv_layers, m.kv_bytes_per_token) == (True, 40, 40 * 576 * 2)
    for extra, path, reason in (
            ("    full_attention_layers: 81\n", "models[0].full_attention_layers",
             "81 full-attention layers exceed the model's 80 layers"),
            ("    qk_rope_head_dim: 64\n", "models[0].kv_lora_rank", "qk_rope_head_dim is MLA's: give kv_lora_rank"),
            ("    kv_lora_rank: 0\n", "models[0].kv_lora_rank", "must be > 0")):
        with pytest.raises(RegistryError) as info:
            load_registry_text(_swap("    head_dim: 128\n", "    head_dim: 128\n" + extra), "bad.yaml")
        (problem,) = [p for p in info.value.problems if p.path == path]
        assert reason in problem.message and problem.line == 18, str(problem)
