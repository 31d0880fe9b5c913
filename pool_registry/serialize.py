"""Registry to plain data in the input schema, so a stored snapshot reloads through the same validator."""

from __future__ import annotations

import json
from typing import Any

from pool_registry.loader import SHAPE_FIELDS, load_registry_text
from pool_registry.model import SCHEDULES, Chip, EngineShape, Interconnect, Model, Pool, Registry
from pool_registry.onboarding import check_to_dict
from pool_registry.vision import vision_to_dict
from pool_registry.yamlread import no_gc_pauses


def _link(link: Interconnect) -> dict[str, Any]:
    out: dict[str, Any] = {"kind": link.kind, "bw_gbps": link.bw_gbps}
    if link.latency_us:
        out["latency_us"] = link.latency_us
    return out


def _chip(c: Chip) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": c.id, "vendor": c.vendor, "name": c.name, "peak_tflops_bf16": c.peak_tflops_bf16,
        "hbm_capacity_gb": c.hbm_capacity_gb, "hbm_bw_tbps": c.hbm_bw_tbps,
        "interconnect": _link(c.interconnect),
        "supported_dtypes": list(c.supported_dtypes),
    }
    if c.peak_tflops:
        out["peak_tflops"] = dict(c.peak_tflops)
    if c.thermal is not None:
        out["thermal"] = {"warning_c": c.thermal.warning_c, "critical_c": c.thermal.critical_c}
    return out


def _model(m: Model) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": m.id, "total_params_b": m.total_params_b, "active_params_b": m.active_params_b,
        "bytes_per_param": m.bytes_per_param, "layers": m.layers, "kv_heads": m.kv_heads,
        "head_dim": m.head_dim, "max_context": m.max_context, "kv_bytes_per_elem": m.kv_bytes_per_elem,
        "requires": dict(m.requires),
    }
    if m.dtype is not None:
        out["dtype"] = m.dtype
    for key in SHAPE_FIELDS:
        if getattr(m, key):
            out[key] = getattr(m, key)
    if m.vision is not None:
        out["vision"] = vision_to_dict(m.vision)
    return out


def _pool(p: Pool) -> dict[str, Any]:
    assign: dict[str, Any] = {}
    if p.assign.node_patterns:
        assign["node_patterns"] = list(p.assign.node_patterns)
    if p.assign.labels:
        assign["labels"] = dict(p.assign.labels)
    out: dict[str, Any] = {
        "id": p.id, "chip": p.chip, "devices": p.devices, "devices_per_node": p.devices_per_node,
        "hourly_cost_per_device": p.hourly_cost_per_device, "exporter": p.exporter, "assign": assign,
        "stack": dict(p.stack),
        "cost_model": {"mfu": p.cost_model.mfu, "mem_bw_eff": p.cost_model.mem_bw_eff,
                       **{k: v for k in ("mfu_decode", "collective_us")
                          if (v := getattr(p.cost_model, k)) is not None},
                       **({"serial_share": p.cost_model.serial_share} if p.cost_model.serial_share else {})},
        "onboarding": {"stage": p.onboarding.stage, "evidence": dict(p.onboarding.evidence)},
    }
    if p.onboarding.checks:
        out["onboarding"]["checks"] = {k: check_to_dict(c) for k, c in p.onboarding.checks.items()}
    if p.network is not None:
        out["network"] = _link(p.network)
    if p.onboarding.started is not None:
        out["onboarding"]["started"] = p.onboarding.started.isoformat()
    if p.serving is not None:
        s = p.serving
        out["serving"] = {
            "model": s.model, "engine": s.engine, "replicas": s.replicas,
            "devices_per_replica": s.devices_per_replica, "max_concurrency": s.max_concurrency,
            "max_queue": s.max_queue, "pp": s.pp, "max_num_batched_tokens": s.max_num_batched_tokens,
            "gpu_memory_utilization": s.gpu_memory_utilization, "kv_cache_dtype": s.kv_cache_dtype,
            "step_overhead_ms": s.step_overhead_ms,
        }
        if s.seq_overhead_us:
            out["serving"]["seq_overhead_us"] = s.seq_overhead_us
        if s.chunk_overhead_us:
            out["serving"]["chunk_overhead_us"] = s.chunk_overhead_us
        if s.ep != 1:
            out["serving"]["ep"] = s.ep
        if s.attention_dp != 1:
            out["serving"]["attention_dp"] = s.attention_dp
        out["serving"].update(scheduling_fields(s))
    return out


def scheduling_fields(s: EngineShape) -> dict[str, Any]:
    """How an engine schedules, as a serving block writes it: only what differs from the defaults (vLLM's)."""
    out: dict[str, Any] = {}
    if s.schedule != SCHEDULES[0]:
        out["schedule"] = s.schedule
    if s.async_scheduling:
        out["async_scheduling"] = True
    return out


def registry_to_dict(reg: Registry) -> dict[str, Any]:
    """Plain JSON-able data in the same shape as the YAML file."""
    return {
        "version": 1, "name": reg.name,
        "chips": [_chip(c) for c in reg.chips],
        "models": [_model(m) for m in reg.models],
        "pools": [_pool(p) for p in reg.pools],
    }


def registry_to_json(reg: Registry) -> str:
    """Canonical JSON text of a registry."""
    with no_gc_pauses():  # tens of thousands of short-lived dicts, none of them in a cycle
        return json.dumps(registry_to_dict(reg), sort_keys=True, separators=(",", ":"), check_circular=False)


def registry_from_json(text: str, source: str = "<snapshot>") -> Registry:
    """Rebuild a registry from its JSON form, validated like a file (JSON is YAML: one reader, one set of
    checks, problems with their lines)."""
    return load_registry_text(text, source)
