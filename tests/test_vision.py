"""A model's vision block: the example fleet's Qwen2.5-VL figures, bad blocks with file:line, the round trip, and
the encoder's weights in a replica's memory."""

from __future__ import annotations

import pytest

from pool_registry import Registry, RegistryError, load_registry_text, registry_from_json, registry_to_json
from replay.candidate import Candidate
from replay.fleet import resolve_pools

BASE = """\
chips:
  - id: h100
    vendor: nvidia
    peak_tflops_bf16: 989
    hbm_capacity_gb: 80
    hbm_bw_tbps: 3.35
    interconnect: {kind: nvlink4, bw_gbps: 450}
    supported_dtypes: [bf16]
models:
  - id: vlm
    total_params_b: 7
    active_params_b: 7
    bytes_per_param: 2
    layers: 28
    kv_heads: 4
    head_dim: 128
    max_context: 32768
    vision:
      encoder_params_b: 0.5
      encoder_layers: 32
      hidden_size: 1280
      patch_size: 14
      image_size: 448
      tokens_per_image: 256
pools:
  - id: p1
    chip: h100
    devices: 1
    devices_per_node: 1
    hourly_cost_per_device: 3.0
    exporter: dcgm
    assign: {node_pattern: "p1-*"}
    serving: {model: vlm, replicas: 1, devices_per_replica: 1, max_concurrency: 8}
    cost_model: {mfu: 0.5, mem_bw_eff: 0.8}
"""


def test_the_example_fleet_declares_qwen2_5_vl_with_its_config_json_figures(fleet: Registry) -> None:
    m = fleet.model("qwen2.5-vl-7b")
    assert m.vision is not None
    v = m.vision
    # vision_config: depth 32, hidden_size 1280, intermediate_size 3420, patch_size 14, spatial_merge_size 2;
    # the merger maps 4 x 1280 = 5120 to the decoder's 3584
    blocks = 32 * (4 * 1280**2 + 3 * 1280 * 3420)
    merger = 5120 * 5120 + 5120 * 3584
    assert v.encoder_params_b == pytest.approx((blocks + merger) / 1e9, abs=0.005)
    assert (v.encoder_layers, v.hidden_size, v.patch_size, v.image_size) == (32, 1280, 14, 448)
    assert v.patches_per_image == (448 // 14) ** 2 == 1024
    assert v.tokens_per_image == 1024 // (2 * 2)  # merged 2 x 2
    # 7.61B of the language model and 0.676B of the encoder: the 8.29B of the checkpoint
    assert m.total_params_b + v.encoder_params_b == pytest.approx(8.29, abs=0.005)
    assert m.resident_bytes == pytest.approx((7.61 + 0.676) * 1e9 * 2)


def test_a_tiling_encoder_counts_its_tiles() -> None:
    text = BASE.replace("      tokens_per_image: 256\n", "      tiles: 4\n      tokens_per_tile: 1601\n").replace(
        "image_size: 448", "image_size: 560")
    v = load_registry_text(text).model("vlm").vision
    assert v is not None
    # Llama 3.2 Vision: 4 tiles of 560 px in 14-px patches, 40 x 40 = 1600 patches and a class token per tile
    assert v.patches_per_image == 4 * 1600
    assert v.tokens_per_image == 4 * 1601


def test_the_block_round_trips_through_the_snapshot() -> None:
    reg = load_registry_text(BASE)
    assert registry_from_json(registry_to_json(reg)) == reg
    tiled = load_registry_text(BASE.replace("tokens_per_image: 256", "tiles: 2\n      tokens_per_tile: 100"))
    assert registry_from_json(registry_to_json(tiled)) == tiled


INVALID = [
    ("negative params", ("encoder_params_b: 0.5", "encoder_params_b: -1"), 19, "models[0].vision.encoder_params_b",
     "must be > 0"),
    ("fractional layers", ("encoder_layers: 32", "encoder_layers: 3.5"), 20, "models[0].vision.encoder_layers",
     "expected an integer"),
    ("image not whole patches", ("image_size: 448", "image_size: 450"), 23, "models[0].vision.image_size",
     "not a whole number of 14-px patches"),
    ("no tokens", ("      tokens_per_image: 256\n", ""), 19, "models[0].vision.tokens_per_image",
     "missing required field"),
    ("both token counts", ("tokens_per_image: 256", "tokens_per_image: 256\n      tokens_per_tile: 64"), 25,
     "models[0].vision.tokens_per_tile", "not both"),
    ("tokens per tile without tiles", ("tokens_per_image: 256", "tokens_per_tile: 64"), 24,
     "models[0].vision.tiles", "tiles (per image) is expected"),
    ("more tokens than patches", ("tokens_per_image: 256", "tokens_per_image: 2000"), 24,
     "models[0].vision.tokens_per_image", "exceed the 1024 patches"),
    ("unknown key", ("patch_size: 14", "patch_size: 14\n      patches: 3"), 23, "models[0].vision.patches",
     "unknown key 'patches'"),
    ("not a mapping", ("    vision:\n", "    vision: yes\n    x_vision:\n"), 18, "models[0].vision",
     "expected a mapping"),
]


@pytest.mark.parametrize(("swap", "line", "path", "reason"), [c[1:] for c in INVALID], ids=[c[0] for c in INVALID])
def test_a_bad_vision_block_names_file_line_field_and_what_was_expected(swap: tuple[str, str], line: int, path: str,
                                                                       reason: str) -> None:
    assert swap[0] in BASE
    with pytest.raises(RegistryError) as info:
        load_registry_text(BASE.replace(swap[0], swap[1], 1), "vlm.yaml")
    found = [p for p in info.value.problems if p.path == path and reason in p.message]
    assert found, [str(p) for p in info.value.problems]
    assert str(found[0]).startswith(f"vlm.yaml:{line}")


def test_the_encoder_weights_take_kv_room_from_the_replica() -> None:
    """80 GB x 0.9 = 72e9 B usable; weights 7e9 x 2 = 14e9 B, the encoder's 0.5e9 x 2 = 1e9 B more; KV per token
    2 x 28 layers x 4 heads x 128 x 2 B = 57,344 B: (72e9 - 15e9) // 57,344 tokens, against (72e9 - 14e9) // 57,344
    for the same model without the encoder."""
    with_encoder = resolve_pools(load_registry_text(BASE), Candidate(name="c"))[0]
    text_only = BASE.split("    vision:")[0] + "pools:" + BASE.split("pools:")[1]
    without = resolve_pools(load_registry_text(text_only), Candidate(name="c"))[0]
    assert with_encoder.kv_capacity_tokens == int((72e9 - 15e9) // 57_344)
    assert without.kv_capacity_tokens == int((72e9 - 14e9) // 57_344)
