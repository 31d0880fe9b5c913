"""MoE as engines run it: data-parallel attention beside expert-parallel experts (SGLang's --enable-dp-attention,
vLLM's --data-parallel-size with --enable-expert-parallel). Goldens for DeepSeek-V3 on eight H200."""

from __future__ import annotations

import dataclasses

import pytest

from pool_registry import RegistryError, load_registry_text
from pool_registry.model import GB
from replay import Candidate, PoolOverride, ReplayError
from replay.costmodel import Collectives, step_model
from replay.fleet import pools_by_id
from replay.planner import Engine, Layout, PlanSettings, enumerate_layouts, memory, plan_model, report_dict
from replay.planner.write import serving_block
from tests.replay_fleets import fleet, pool
from tests.test_attention import DEEPSEEK_V3, H200
from tests.test_loader import _moe

# DeepSeek-V3: a routed expert is (671 - 37) / (256 - 8) = 2.5565B parameters, so the dense part every token reads
# is 37 - 8 x 2.5565 = 16.548B (FP8: 1 B each): attention, the shared expert, embeddings
EXPERT_B = (671 - 37) / (256 - 8)
DENSE = (37 - 8 * EXPERT_B) * 1e9


def specs(**override: int):  # type: ignore[no-untyped-def]
    reg = fleet(pool("r", chip_id="h200", model_id="deepseek-v3", dpr=8, mfu=0.4, eff=0.7), chips=(H200,),
                models=(DEEPSEEK_V3,))
    return pools_by_id(reg, Candidate(name="t", pools={"r": PoolOverride(**override)}))["r"]  # type: ignore[arg-type]


def test_dp_attention_keeps_one_latent_per_token_and_a_dense_copy_per_group() -> None:
    tp8, dp8 = specs(ep=8), specs(ep=8, attention_dp=8)
    assert DEEPSEEK_V3.dense_weight_bytes == pytest.approx(DENSE)
    assert (tp8.attention_tp, dp8.attention_tp) == (8, 1)
    assert (tp8.kv_bytes_held_per_token, dp8.kv_bytes_held_per_token) == (8 * 70_272, 70_272)
    # TP8 attention: (8 x 141 GB x 0.9 - 671 GB) / 562,176 B; DP8: seven more dense copies, one latent a token
    assert tp8.kv_capacity_tokens == int((8 * 141e9 * 0.9 - 671e9) // (8 * 70_272))
    assert dp8.kv_capacity_tokens == int((8 * 141e9 * 0.9 - 671e9 - 7 * DENSE) // 70_272)
    assert dp8.kv_capacity_tokens > 5 * tp8.kv_capacity_tokens  # 5.3x the tokens, for 7 dense copies
    # a decode pass of one token reads each group's dense copy: 8 x 16.5 GB, and the 8 experts it picks
    one = step_model(dp8).weight_bytes_read(1.0)
    assert one == pytest.approx(8 * DENSE + 8 * EXPERT_B * 1e9, rel=1e-9)
    assert step_model(tp8).weight_bytes_read(1.0) == pytest.approx(DENSE + 8 * EXPERT_B * 1e9, rel=1e-9)


def test_dp_attention_drops_the_attention_all_reduce() -> None:
    tp8, dp8 = Collectives.of(specs(ep=8)), Collectives.of(specs(ep=8, attention_dp=8))
    # TP8 with EP8: one all-reduce a layer (attention's) of 2 x 7/8 of 7168 x 2 B a token over 450 GB/s, plus the
    # two all-to-alls; DP8: the all-to-alls alone
    all_reduce = 61 * 2 * 7 / 8 * 7168 * 2 / 450e9
    assert tp8.s_per_token - dp8.s_per_token == pytest.approx(all_reduce, rel=1e-9)
    assert tp8.fixed_s - dp8.fixed_s == pytest.approx(61 * 2 * 7 * 2.13e-6, rel=1e-9)


def test_dp_attention_is_checked() -> None:
    with pytest.raises(ReplayError, match="expert-parallel experts"):
        specs(attention_dp=8)
    with pytest.raises(ReplayError, match="need a TP degree they divide"):
        specs(ep=8, attention_dp=3)
    dense = dataclasses.replace(DEEPSEEK_V3, experts=0, experts_per_token=0)
    reg = fleet(pool("r", chip_id="h200", model_id="deepseek-v3", dpr=8), chips=(H200,), models=(dense,))
    with pytest.raises(ReplayError, match="declares no experts"):
        pools_by_id(reg, Candidate(name="t", pools={"r": PoolOverride(ep=8, attention_dp=8)}))
    text = _moe("    experts: 64\n    experts_per_token: 4\n").replace("max_concurrency: 32}",
                                                                    "max_concurrency: 32, ep: 8, attention_dp: 8}")
    assert load_registry_text(text).pool("p1").serving.attention_dp == 8  # type: ignore[union-attr]
    with pytest.raises(RegistryError, match="attention_dp"):
        load_registry_text(text.replace("ep: 8, attention_dp: 8", "attention_dp: 8"))


# --- the planner offers data-parallel attention and sizes it as the replay does ---------------------------------

def planner_registry():  # type: ignore[no-untyped-def]
    return fleet(pool("r", chip_id="h200", model_id="deepseek-v3", dpr=8, mfu=0.4, eff=0.7), chips=(H200,),
                 models=(DEEPSEEK_V3,))


def test_the_planner_enumerates_dp_attention_beside_expert_parallel_experts() -> None:
    reg = planner_registry()
    kept, _ = enumerate_layouts(reg.pool("r"), H200, DEEPSEEK_V3)
    with_dp = {lay.label for lay in kept if lay.attention_dp > 1}
    # every divisor of tp above 1, with the experts split over tp (256 experts split over 2, 4 and 8); pp 1 only,
    # as 61 layers split into no pipeline stages
    assert with_dp == {"tp2 pp1 ep2 dp2", "tp4 pp1 ep4 dp2", "tp4 pp1 ep4 dp4", "tp8 pp1 ep8 dp2", "tp8 pp1 ep8 dp4",
                       "tp8 pp1 ep8 dp8"}
    dense = dataclasses.replace(DEEPSEEK_V3, experts=0, experts_per_token=0)
    assert all(lay.attention_dp == 1 for lay in enumerate_layouts(reg.pool("r"), H200, dense)[0])


def test_dp_attention_memory_by_hand() -> None:
    # per device at TP8 EP8 DP8 on H200 (141 GB x 0.9): the weights' eighth and seven eighths of a dense copy
    # (each of the 8 groups of one device keeps its own); one latent of 70,272 B a token, on one device of eight
    tp8 = memory(Layout("r", 8, 1, 8, 1), DEEPSEEK_V3, H200, Engine(0.9), 64 * 2048)
    dp8 = memory(Layout("r", 8, 1, 8, 1, 8), DEEPSEEK_V3, H200, Engine(0.9), 64 * 2048)
    assert dp8.weights_gb * GB == pytest.approx(671e9 / 8 + 7 * DENSE / 8)
    assert tp8.weights_gb * GB == pytest.approx(671e9 / 8)
    assert (tp8.kv_gb * GB, dp8.kv_gb * GB) == pytest.approx((64 * 2048 * 70_272, 64 * 2048 * 70_272 / 8))
    room = 141e9 * 0.9 - dp8.weights_gb * GB - dp8.working_gb * GB
    assert dp8.kv_tokens_per_replica == int(room // (70_272 / 8))
    # the replay's capacity of the same replica (specs above) less the working memory the planner also keeps
    replay = specs(ep=8, attention_dp=8).kv_capacity_tokens
    assert dp8.kv_tokens_per_replica == pytest.approx(replay - 8 * dp8.working_gb * GB / 70_272, abs=2)


def test_a_dp_attention_plan_is_timed_reported_and_written_as_such() -> None:
    reg = planner_registry()
    report = plan_model(reg, "deepseek-v3", ("r",), PlanSettings(isl=1024, osl=128, concurrency=(64,)))
    by_label = {p.layout.label: p for p in report.plans}
    tp8, dp8 = by_label["tp8 pp1 ep8"], by_label["tp8 pp1 ep8 dp8"]
    assert tp8.fits and dp8.fits
    # the same replica timed without the attention all-reduce: a faster first token
    assert dp8.ttft_ms_p50 is not None and tp8.ttft_ms_p50 is not None and dp8.ttft_ms_p50 < tp8.ttft_ms_p50
    assert dp8.memory.kv_tokens_per_replica > 5 * tp8.memory.kv_tokens_per_replica
    row = next(r for r in report_dict(report)["plans"] if r["attention_dp"] == 8 and r["tp"] == 8)
    assert (row["ep"], row["replicas"]) == (8, 1)
    block = serving_block(reg.pool("r"), "deepseek-v3", dp8)
    assert (block["ep"], block["attention_dp"]) == (8, 8)


def test_the_shared_expert_is_read_and_computed_with_the_every_token_part() -> None:
    # DeepSeek-V3's config.json: 61 layers of which the first 3 dense, so 58 MoE layers, each with one shared
    # expert of moe_intermediate_size 2048 on hidden 7168 (SwiGLU: 3 matrices): 58 x 3 x 7168 x 2048 = 2.5545B,
    # the size the parameter counts give a routed expert to 0.1 %. The shared expert sees every token, so the
    # count-derived dense part (16.55B) holds it, and only the k routed experts' FLOPs (8 x 2.5565 / 37 = 55 %)
    # take the experts' own roofline.
    shared = 58 * 3 * 7168 * 2048 / 1e9
    assert shared == pytest.approx(EXPERT_B, rel=1e-3)
    assert shared < DENSE / 1e9
    assert DEEPSEEK_V3.routed_share == pytest.approx(8 * EXPERT_B / 37)
    step = step_model(specs(ep=8))
    assert step.routed == pytest.approx(0.5528, abs=1e-4)
    # a decode pass of 64 sequences sends 64 x 8 / 256 = 2 tokens to each touched expert: the experts read
    # 256 x (1 - (248/256)^64) = 222.4 of 256 at bandwidth (1 B a parameter), whatever the dense part's FLOPs
    touched = 256 * (1 - (248 / 256) ** 64)
    assert touched == pytest.approx(222.4, abs=0.1)
    expert_s = touched * EXPERT_B * 1e9 * step.s_per_byte
    assert expert_s > 64 * step.routed * step.s_per_token_decode  # bandwidth-bound by far
    assert step.fixed_seconds(64, 64) == pytest.approx(
        step.fixed_s + 64 * step.seq_overhead_s + 64 * step.comm_s_per_token + expert_s, rel=1e-9)
