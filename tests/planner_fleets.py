"""Small registries for the planner tests: one H100 node with a 70B FP8 model, and odd shapes for the rules."""

from __future__ import annotations

from typing import Any

import yaml

from pool_registry import Registry, load_registry_text
from tests.conftest import FLEET

H100 = {"id": "h100-sxm", "vendor": "nvidia", "name": "NVIDIA H100 SXM5 80GB", "peak_tflops_bf16": 989,
        "hbm_capacity_gb": 80, "hbm_bw_tbps": 3.35, "interconnect": {"kind": "nvlink4", "bw_gbps": 450},
        "supported_dtypes": ["bf16", "fp16", "fp8"]}
# Llama 3.1 70B's shape (config.json) with FP8 weights and a BF16 KV cache.
DENSE_70B_FP8 = {"id": "dense-70b-fp8", "total_params_b": 70, "active_params_b": 70, "bytes_per_param": 1,
                 "kv_bytes_per_elem": 2, "layers": 80, "kv_heads": 8, "head_dim": 128, "hidden_size": 8192,
                 "attention_heads": 64, "max_context": 131072, "dtype": "fp8"}
# A 3T-parameter MoE in BF16 (6 TB of weights), no hidden size declared: its working memory is the runtime alone.
MOE_3T = {"id": "moe-3t", "total_params_b": 3000, "active_params_b": 100, "bytes_per_param": 2, "layers": 64,
          "kv_heads": 8, "head_dim": 128, "experts": 512, "experts_per_token": 8, "max_context": 131072}


def pool(pool_id: str = "h100-x", *, devices: int = 8, per_node: int = 8, chip: str = "h100-sxm",
         serving: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    """A pool entry in the registry file's shape."""
    out: dict[str, Any] = {"id": pool_id, "chip": chip, "devices": devices, "devices_per_node": per_node,
                           "hourly_cost_per_device": 3.2, "exporter": "dcgm",
                           "assign": {"node_pattern": f"{pool_id}-*"},
                           "cost_model": {"mfu": 0.45, "mem_bw_eff": 0.75}, **extra}
    if serving is not None:
        out["serving"] = serving
    return out


def registry(models: list[dict[str, Any]], pools: list[dict[str, Any]],
             chips: list[dict[str, Any]] | None = None) -> Registry:
    """A registry of these parts, through the loader."""
    data = {"version": 1, "name": "planner-test", "chips": chips or [H100], "models": models, "pools": pools}
    return load_registry_text(yaml.safe_dump(data), "planner-test.yaml")


def fleet_data() -> dict[str, Any]:
    """The example fleet as plain data."""
    data: dict[str, Any] = yaml.safe_load(FLEET.read_text())
    return data


def fleet_with(model: dict[str, Any]) -> Registry:
    """The example fleet with one more model."""
    data = fleet_data()
    data["models"].append(model)
    return load_registry_text(yaml.safe_dump(data), str(FLEET))
