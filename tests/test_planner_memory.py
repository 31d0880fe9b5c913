"""Memory per device by hand: weights, KV cache, working memory, and the memory wall."""

from __future__ import annotations

import math

import pytest

from pool_registry import Registry
from pool_registry.model import GB
from replay.planner import Engine, Layout, PlanSettings, memory, memory_wall, plan_model, report_lines
from tests.planner_fleets import DENSE_70B_FP8, MOE_3T, fleet_with, pool, registry

# 70B dense, FP8 weights (1 B/param), BF16 KV (2 B), on 80 GB devices at gpu_memory_utilization 0.9, KV for 16
# sequences of 8k context, the default token budget of 8192:
#   usable   = 80 x 0.9                                          = 72 GB
#   weights  = 70e9 x 1 B / tp                                    = 70 GB (tp 1), 35 GB (tp 2)
#   KV/token = 2 (K, V) x 80 layers x 8 KV heads x 128 x 2 B      = 327,680 B
#   KV       = 8192 x 16 tokens x 327,680 B / tp                  = 42.950 GB (tp 1), 21.475 GB (tp 2)
#   working  = 1 GB + 8192 x 8192 x 2 B x (2 + 7 / tp)            = 2.208 GB (tp 1), 1.738 GB (tp 2)
#   tp 1: 70 + 42.950 + 2.208 = 115.158 GB > 72: short by 43.158 GB
#   tp 2: 35 + 21.475 + 1.738 =  58.213 GB <= 72: fits
KV = 8192 * 16 * 327_680 / GB
WORK = {1: 1 + 8192 * 8192 * 2 * 9 / GB, 2: 1 + 8192 * 8192 * 2 * 5.5 / GB}


def test_the_70b_fp8_model_does_not_fit_tp1_and_fits_tp2() -> None:
    reg = registry([DENSE_70B_FP8], [pool()])
    model, chip = reg.model("dense-70b-fp8"), reg.chip("h100-sxm")
    tp1 = memory(Layout("h100-x", 1, 1, 1, 8), model, chip, Engine(0.9), 8192 * 16)
    tp2 = memory(Layout("h100-x", 2, 1, 1, 4), model, chip, Engine(0.9), 8192 * 16)
    assert tp1.usable_gb == pytest.approx(72.0)
    assert (tp1.weights_gb, tp1.kv_gb, tp1.working_gb) == pytest.approx((70.0, 42.94967296, 2.207959552))
    assert (tp1.weights_gb, tp1.kv_gb, tp1.working_gb) == pytest.approx((70.0, KV, WORK[1]))
    assert not tp1.fits and tp1.shortfall_gb == pytest.approx(43.157632512)
    assert (tp2.weights_gb, tp2.kv_gb, tp2.working_gb) == pytest.approx((35.0, KV / 2, WORK[2]))
    assert tp2.fits and tp2.shortfall_gb == 0.0
    # the replica's KV room at tp 2: (72 - 35 - 1.738) GB per device / (327,680 B / 2) per token
    assert tp2.kv_tokens_per_replica == int((72e9 - 35e9 - WORK[2] * GB) // (327_680 / 2))


def test_the_report_names_the_shortfall() -> None:
    reg = registry([DENSE_70B_FP8], [pool()])
    report = plan_model(reg, "dense-70b-fp8", settings=PlanSettings(context=8192, concurrency=(16,)))
    fits = {(p.layout.tp, p.layout.pp): p.fits for p in report.plans}
    assert fits[(1, 1)] is False and fits[(2, 1)] is True
    text = "\n".join(report_lines(report, top=0))
    assert "h100-x tp1 pp1 at concurrency 16: 70.0 + 42.9 + 2.2 GB > 72.0 GB usable, short by 43.2 GB" in text


def test_a_kv_head_is_replicated_when_tp_exceeds_the_kv_heads() -> None:
    model = {**DENSE_70B_FP8, "kv_heads": 4, "attention_heads": 64}
    reg = registry([model], [pool()])
    m, chip = reg.model("dense-70b-fp8"), reg.chip("h100-sxm")
    tp4 = memory(Layout("h100-x", 4, 1, 1, 2), m, chip, Engine(), 1000)
    tp8 = memory(Layout("h100-x", 8, 1, 1, 1), m, chip, Engine(), 1000)
    assert tp8.kv_gb == pytest.approx(tp4.kv_gb)  # 1 head per device either way
    assert tp8.weights_gb == pytest.approx(tp4.weights_gb / 2)


# 3T MoE in BF16 on the example fleet, default plan (isl 1024 + osl 128 = 1,152 tokens x 64 sequences):
#   weights  = 3000e9 x 2 B                                  = 6000 GB
#   KV       = 1152 x 64 x (2 x 64 layers x 8 x 128 x 2 B)   = 73,728 x 262,144 B = 19.327 GB
#   per device: HBM x 0.9 - 1 GB runtime (no hidden size, so no activations)
#   h100 80 GB:   71.0 GB  -> ceil(6019.327 / 71.0)  =  85 > 64 devices
#   mi300x 192:  171.8 GB  -> ceil(6019.327 / 171.8) =  36 > 32
#   ascend 64:    56.6 GB  -> ceil(6019.327 / 56.6)  = 107 > 64
#   gaudi3 128:  114.2 GB  -> ceil(6019.327 / 114.2) =  53 > 32
#   mlu370 48:    42.2 GB  -> ceil(6019.327 / 42.2)  = 143 > 16
WALLS = {"h100-a": 86, "mi300x-a": 36, "ascend-a": 108, "gaudi3-a": 53, "mlu370-a": 145, "h100-vl": 86}


def test_a_3t_moe_fits_no_pool_of_the_example_fleet_and_names_the_wall() -> None:
    reg = fleet_with(MOE_3T)
    need = 6000 + 1152 * 64 * 262_144 / GB
    # no hidden_size declared: estimated as sqrt(100e9 / (12 x 64 layers)) = 11411, whose activations at a
    # node-wide tp 8 take 8192 x 11411 x 2 B x (2 + 7/8) of every device beside the 1 GB runtime
    act = 8192 * 11411 * 2 * (2 + 7 / 8) / GB
    assert {p: math.ceil(need / (hbm * 0.9 - 1 - act)) for p, hbm in (
        ("h100-a", 80), ("mi300x-a", 192), ("ascend-a", 64), ("gaudi3-a", 128), ("mlu370-a", 48), ("h100-vl", 80))
    } == WALLS
    report = plan_model(reg, "moe-3t")
    assert report.plans and not any(p.fits for p in report.plans) and report.best is None
    assert {w.pool: w.min_devices for w in report.walls} == WALLS
    assert not any(w.pool_has_them for w in report.walls)
    text = "\n".join(report_lines(report))
    assert "memory wall on h100-a: nothing fits; the model needs at least 86 devices; the pool has 64" in text


def test_the_wall_of_a_pool_that_has_the_devices() -> None:
    reg = registry([DENSE_70B_FP8], [pool()])
    chip, model = reg.chip("h100-sxm"), reg.model("dense-70b-fp8")
    # (70 + 42.950) GB over 72 - 1 - 8192 x 8192 x 2 x (2 + 7/8) B per device at a node-wide tp 8
    room = 72 - 1 - 8192 * 8192 * 2 * (2 + 7 / 8) / GB
    assert memory_wall(model, chip, Engine(), 8192 * 16, 8) == math.ceil((70 + KV) / room) == 2


def test_a_vision_encoder_that_tips_a_layout_over_is_named_where_it_no_longer_fits() -> None:
    """The 70B FP8 model at tp 2 uses 58.213 of 72 GB (above). A 15B-parameter BF16 vision encoder adds 30 GB,
    split by tp: 15 GB per device, 73.213 GB > 72 GB, short by 1.213 GB; at tp 4 it is 17.5 + 7.5 + 10.737 + 1.503
    = 37.240 GB and fits."""
    vlm = {**DENSE_70B_FP8, "vision": {"encoder_params_b": 15, "encoder_layers": 48, "hidden_size": 4096,
                                       "patch_size": 14, "image_size": 448, "tokens_per_image": 256,
                                       "bytes_per_param": 2}}
    settings = PlanSettings(context=8192, concurrency=(16,))
    without = plan_model(registry([DENSE_70B_FP8], [pool()]), "dense-70b-fp8", settings=settings)
    with_encoder = plan_model(registry([vlm], [pool()]), "dense-70b-fp8", settings=settings)
    fits = {(p.layout.tp, p.layout.pp): (p.fits, p.memory) for p in with_encoder.plans}
    assert {(p.layout.tp, p.layout.pp): p.fits for p in without.plans}[(2, 1)] is True
    tp2_fits, tp2 = fits[(2, 1)]
    assert tp2_fits is False
    assert (tp2.weights_gb, tp2.encoder_gb) == pytest.approx((35.0 + 15.0, 15.0))
    assert tp2.shortfall_gb == pytest.approx(35 + 15 + KV / 2 + WORK[2] - 72)
    assert fits[(4, 1)][0] is True and fits[(4, 1)][1].encoder_gb == pytest.approx(7.5)
    text = "\n".join(report_lines(with_encoder, top=0))
    assert "h100-x tp2 pp1 at concurrency 16: 50.0 (of which the vision encoder 15.0) + 21.5 + 1.7 GB > 72.0 GB " \
           "usable, short by 1.2 GB" in text
    # the memory wall counts it too: 70 + 30 + 42.95 GB over what a device of a node-wide group has room for
    chip = registry([vlm], [pool()]).chip("h100-sxm")
    m_vlm = registry([vlm], [pool()]).model("dense-70b-fp8")
    room = 72 - (1 + 8192 * 8192 * 2 * (2 + 7 / 8) / GB)
    assert memory_wall(m_vlm, chip, Engine(0.9), 8192 * 16, 8) == math.ceil((100 + KV) / room)


def test_the_plan_of_a_vision_language_model_names_its_encoders_share_of_the_weights(fleet: Registry) -> None:
    """Qwen2.5-VL-7B on the example fleet's H100 pool: 7.61e9 x 2 B of decoder and 0.676e9 x 2 B of encoder; at tp 1
    the device holds 15.22 + 1.352 = 16.572 GB of weights, the encoder 8 % of them."""
    report = plan_model(fleet, "qwen2.5-vl-7b", pool_ids=("h100-a",), settings=PlanSettings(concurrency=(1,)))
    tp1 = next(p for p in report.plans if (p.layout.tp, p.layout.pp) == (1, 1))
    assert (tp1.memory.weights_gb, tp1.memory.encoder_gb) == pytest.approx((16.572, 1.352))
    text = "\n".join(report_lines(report, top=0))
    best = report.plans[0]
    assert (f"vision encoder: {best.memory.encoder_gb:.1f} of {best.memory.weights_gb:.1f} GB of weights per "
            f"device") in text
    # its time on an image: 1024 patches x 2 x 0.676e9 FLOPs at 989 TFLOP/s x h100-a's mfu 0.45 on the devices of the
    # first stage: 3.11 ms on one device (tp1, and tp1 pp2's first stage), half that over tp2
    one = 1024 * 2 * 0.676e9 / (989e12 * 0.45) * 1e3
    per_image = {(p.layout.tp, p.layout.pp): p.encode_ms_per_image for p in report.plans}
    assert per_image[(1, 1)] == pytest.approx(one) and per_image[(1, 2)] == pytest.approx(one)
    assert per_image[(2, 1)] == pytest.approx(one / 2)
    assert f"{best.encode_ms_per_image:.1f} ms an image" in text
    assert plan_model(fleet, "llama-3.1-70b", pool_ids=("h100-a",),
                      settings=PlanSettings(concurrency=(1,))).plans[0].encode_ms_per_image is None
