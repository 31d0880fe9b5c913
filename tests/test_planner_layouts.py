"""Layouts of one replica: TP within a node, PP in powers of two across nodes, EP for MoE, and the rules."""

from __future__ import annotations

import pytest

from replay.planner import RULES, Layout, enumerate_layouts
from tests.planner_fleets import DENSE_70B_FP8, pool, registry

MOE = {"id": "moe-60", "total_params_b": 14.3, "active_params_b": 2.7, "bytes_per_param": 2, "layers": 24,
       "kv_heads": 16, "head_dim": 128, "attention_heads": 16, "hidden_size": 2048, "experts": 60,
       "experts_per_token": 4, "max_context": 32768}


def layouts_of(model: dict, **pool_args: object) -> tuple[list[Layout], dict[tuple[int, int, int], tuple[str, str]]]:
    reg = registry([model], [pool(**pool_args)])  # type: ignore[arg-type]
    p = reg.pools[0]
    kept, excluded = enumerate_layouts(p, reg.chip_of(p), reg.models[0])
    return kept, {(e.layout.tp, e.layout.pp, e.layout.ep): (e.rule, e.reason) for e in excluded}


def test_tp_stays_within_a_node_and_pp_spans_nodes_in_powers_of_two() -> None:
    kept, excluded = layouts_of(DENSE_70B_FP8, devices=32, per_node=8)
    every = {(lay.tp, lay.pp) for lay in kept} | {(tp, pp) for tp, pp, _ in excluded}
    assert every == {(tp, pp) for tp in (1, 2, 4, 8) for pp in (1, 2, 4, 8, 16, 32) if tp * pp <= 32}
    by = {(lay.tp, lay.pp): lay for lay in kept}
    assert by[(8, 2)].replicas == 2 and by[(8, 2)].devices_per_replica == 16 and by[(4, 1)].replicas == 8
    assert all(lay.ep == 1 for lay in kept)  # a dense model has no expert parallelism


@pytest.mark.parametrize(("model", "pool_args", "layout", "rule", "says"), [
    ({**DENSE_70B_FP8, "attention_heads": 28, "kv_heads": 4}, {}, (8, 1, 1), "heads",
     "28 attention heads do not split over tp 8"),
    ({**DENSE_70B_FP8, "attention_heads": 24, "kv_heads": 4}, {"devices": 6, "per_node": 6}, (3, 1, 1), "kv_heads",
     "4 KV heads neither split over tp 3"),
    ({**DENSE_70B_FP8, "layers": 94}, {}, (1, 4, 1), "layers", "94 layers do not split into 4 pipeline stages"),
    (MOE, {}, (8, 1, 8), "experts", "60 experts do not split over ep 8"),
])
def test_each_rule_excludes_a_layout_and_names_itself(model: dict, pool_args: dict, layout: tuple[int, int, int],
                                                      rule: str, says: str) -> None:
    kept, excluded = layouts_of(model, **pool_args)
    assert rule in RULES
    assert layout in excluded, f"{layout} was kept"
    assert excluded[layout][0] == rule and says in excluded[layout][1]
    assert layout not in {(lay.tp, lay.pp, lay.ep) for lay in kept}


def test_a_moe_model_gets_expert_parallel_layouts_where_the_experts_split() -> None:
    kept, excluded = layouts_of(MOE)
    eps = {(lay.tp, lay.pp, lay.ep) for lay in kept}
    assert {(4, 1, 4), (4, 1, 1), (8, 1, 1), (2, 2, 2)} <= eps  # 60 experts split over 4 and 2, not 8
    assert (8, 1, 8) in excluded


def test_a_chip_without_the_models_dtype_excludes_every_layout() -> None:
    chip = {"id": "bf16-only", "vendor": "x", "peak_tflops_bf16": 300, "hbm_capacity_gb": 64, "hbm_bw_tbps": 1.6,
            "interconnect": {"kind": "hccs", "bw_gbps": 196}, "supported_dtypes": ["bf16", "fp16"]}
    reg = registry([DENSE_70B_FP8], [pool(chip="bf16-only")], chips=[chip])
    p = reg.pools[0]
    kept, excluded = enumerate_layouts(p, reg.chip_of(p), reg.models[0])
    assert not kept and excluded
    assert {e.rule for e in excluded} == {"dtype"}
    assert "does not support the model's fp8 weights" in excluded[0].reason
