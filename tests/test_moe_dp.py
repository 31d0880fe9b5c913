"""MoE as engines run it: data-parallel attention beside expert-parallel experts (SGLang's --enable-dp-attention,
vLLM's --data-parallel-size with --enable-expert-parallel). Goldens for DeepSeek-V3 on eight H200."""

from __future__ import annotations

import dataclasses

import pytest

from pool_registry import RegistryError, load_registry_text
from replay import Candidate, PoolOverride, ReplayError
from replay.costmodel import Collectives, step_model
from replay.fleet import pools_by_id
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
