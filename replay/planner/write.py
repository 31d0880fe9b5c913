"""The chosen layout as a pool's `serving:` block, written into a copy of the registry data.

The block carries what the planner timed: the layout (replicas, devices per replica, pp, ep, attention_dp), the
concurrency as max_concurrency, the engine settings and the coefficients (into the pool's cost_model and serving
overheads), so `hetpool registry load` of the copy and `hetpool replay bench` or `replay run` on it reproduce the
plan's numbers.
"""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any

import yaml

from pool_registry import Pool, Registry, load_registry_text
from pool_registry.onboarding import ITEMS, item_spec
from pool_registry.serialize import scheduling_fields
from replay.planner.rank import Plan
from replay.planner.search import PlanError
from replay.planner.timing import Coefficients, engine_of


def serving_block(pool: Pool, model_id: str, plan: Plan) -> dict[str, Any]:
    """The `serving:` mapping of a plan on its pool, keeping the pool's engine and queue bound."""
    s = pool.serving
    engine = engine_of(pool)
    lay = plan.layout
    block: dict[str, Any] = {
        "model": model_id, "engine": s.engine if s else "vllm", "replicas": lay.replicas,
        "devices_per_replica": lay.devices_per_replica, "max_concurrency": plan.concurrency,
        "max_queue": s.max_queue if s else 1024, "pp": lay.pp,
        "max_num_batched_tokens": max(engine.max_num_batched_tokens, plan.concurrency),
        "gpu_memory_utilization": engine.gpu_memory_utilization, "kv_cache_dtype": engine.kv_cache_dtype,
    }
    if lay.ep > 1:
        block["ep"] = lay.ep
    if lay.attention_dp > 1:
        block["attention_dp"] = lay.attention_dp
    if s:
        block.update(scheduling_fields(s))
    return block


def with_serving(data: dict[str, Any], pool_id: str, block: dict[str, Any],
                 coefficients: Coefficients) -> dict[str, Any]:
    """A copy of registry data (the YAML file's shape) whose pool serves the block with these coefficients."""
    out = copy.deepcopy(data)
    pools = out.get("pools") or []
    for item in pools:
        if isinstance(item, dict) and item.get("id") == pool_id:
            item["serving"] = {**block, "step_overhead_ms": coefficients.step_overhead_ms,
                               **({"seq_overhead_us": coefficients.seq_overhead_us}
                                  if coefficients.seq_overhead_us else {}),
                               **({"chunk_overhead_us": coefficients.chunk_overhead_us}
                                  if coefficients.chunk_overhead_us else {})}
            cost = {"mfu": coefficients.mfu, "mem_bw_eff": coefficients.mem_bw_eff}
            if coefficients.mfu_decode is not None:
                cost["mfu_decode"] = coefficients.mfu_decode
            if coefficients.collective_us is not None:
                cost["collective_us"] = coefficients.collective_us
            if coefficients.serial_share:
                cost["serial_share"] = coefficients.serial_share
            item["cost_model"] = cost
            return out
    raise PlanError(f"unknown pool '{pool_id}' in the registry data; known: "
                    f"{', '.join(str(p.get('id')) for p in pools if isinstance(p, dict))}")


def rebase_evidence(data: dict[str, Any], source_dir: Path, target_dir: Path) -> dict[str, Any]:
    """A copy whose relative evidence-file paths (onboarding.checks) point from target_dir at the same files."""
    out = copy.deepcopy(data)
    for item in out.get("pools") or []:
        checks = (item.get("onboarding") or {}).get("checks") or {} if isinstance(item, dict) else {}
        for name, check in checks.items():
            if not isinstance(check, dict) or name not in _FILE_ITEMS:
                continue
            for role in item_spec(name).file_roles:
                written = check.get(role)
                if isinstance(written, str) and not Path(written).is_absolute():
                    check[role] = os.path.relpath(Path(source_dir, written).resolve(), target_dir.resolve())
    return out


def registry_yaml(data: dict[str, Any], source: str) -> str:
    """YAML text of registry data, validated by the registry loader before anyone writes it."""
    text = yaml.safe_dump(data, sort_keys=False, allow_unicode=True)
    load_registry_text(text, source)
    return text


def registry_with_plan(registry: Registry, data: dict[str, Any], model_id: str, plan: Plan,
                       coefficients: Coefficients, source: str) -> str:
    """YAML text of the registry data with the plan written as its pool's serving block."""
    block = serving_block(registry.pool(plan.layout.pool), model_id, plan)
    return registry_yaml(with_serving(data, plan.layout.pool, block, coefficients), source)


_FILE_ITEMS = {i.id for i in ITEMS if i.file_roles}
