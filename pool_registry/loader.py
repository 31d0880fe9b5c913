"""The one loader for fleet registry YAML: text in, validated Registry out, or every problem at once."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from yaml.nodes import Node

from pool_registry.model import (
    DTYPES,
    KV_CACHE_DTYPES,
    ONBOARDING_STAGES,
    PEAK_FORMATS,
    SCHEDULES,
    Assignment,
    Chip,
    CostModel,
    Interconnect,
    Model,
    Onboarding,
    Pool,
    Registry,
    Serving,
    Thermal,
)
from pool_registry.onboarding import read_checks
from pool_registry.versions import SpecifierError, parse_specifier
from pool_registry.vision import read_vision
from pool_registry.yamlread import ConfigError, Field, Reader, no_gc_pauses, read_text

_ID = re.compile(r"^[a-z0-9][a-z0-9._-]*$")


class RegistryError(ConfigError):
    """A registry file that cannot be used."""


def load_registry(path: str | Path) -> Registry:
    """Read and validate a registry file."""
    text = read_text(path, RegistryError)
    return load_registry_text(text, str(path))


def load_registry_text(text: str, source: str = "<registry>") -> Registry:
    """Validate registry YAML (or JSON) text; raise RegistryError listing every problem."""
    with no_gc_pauses():  # the tree and the registry built from it stay alive to the end
        r = Reader(source)
        return _load(r, r.root(text, "a mapping with chips, models and pools", RegistryError))


def _load(r: Reader, root: Node) -> Registry:
    """The registry in a tree of YAML nodes."""
    top = r.mapping(root, "", required=("chips", "pools"), optional=("version", "name", "models"))
    if "version" in top:
        r.integer(top["version"], "version", ge=1, le=1)
    name = r.optional(top, "name", "", r.string, "fleet")
    chips = tuple(_chip(r, p, n) for p, n in r.items(top.get("chips"), "chips"))
    models = tuple(_model(r, p, n) for p, n in r.items(top.get("models"), "models"))
    pools = tuple(_pool(r, p, n) for p, n in r.items(top.get("pools"), "pools"))
    _check_ids(r, top.get("chips"), "chips", [c.id for c in chips])
    _check_ids(r, top.get("models"), "models", [m.id for m in models])
    _check_ids(r, top.get("pools"), "pools", [p.id for p in pools])
    _check_refs(r, top, chips, models, pools)
    if "pools" in top and not pools and not r.problems:
        r.fail(top["pools"], "pools", "expected at least one pool")
    if r.problems:
        raise RegistryError(r.problems)
    return Registry(name=name, chips=chips, models=models, pools=pools)


def _ident(r: Reader, node: Node, path: str) -> str:
    value = r.text(node, path)
    if value and not _ID.match(value):
        r.fail(node, path, f"bad id {value!r}; use lower-case letters, digits, '.', '_' and '-'")
    return value


def _chip(r: Reader, path: str, node: Node) -> Chip:
    f = r.mapping(node, path, required=(
        "id", "vendor", "hbm_capacity_gb", "hbm_bw_tbps", "interconnect", "supported_dtypes",
    ), optional=("name", "thermal", "peak_tflops_bf16", "peak_tflops"))
    ic = _link(r, f["interconnect"], f"{path}.interconnect") if "interconnect" in f else Interconnect("", 0.0)
    dtypes: tuple[str, ...] = ()
    if "supported_dtypes" in f:
        dtypes = r.string_list(f["supported_dtypes"], f"{path}.supported_dtypes")
        for i, d in enumerate(dtypes):
            if d not in DTYPES:
                r.fail(r.element(f["supported_dtypes"], i), f"{path}.supported_dtypes[{i}]",
                       f"unknown dtype '{d}'; expected one of: {', '.join(DTYPES)}")
    chip_id = r.optional(f, "id", path, lambda n, p: _ident(r, n, p), "")
    peaks = _peaks(r, node, f, path, dtypes)
    return Chip(
        id=chip_id,
        vendor=r.optional(f, "vendor", path, r.string, ""),
        name=r.optional(f, "name", path, r.string, chip_id),
        peak_tflops_bf16=peaks.pop("bf16", 0.0),
        peak_tflops=peaks,
        hbm_capacity_gb=r.optional(f, "hbm_capacity_gb", path, _positive(r), 0.0),
        hbm_bw_tbps=r.optional(f, "hbm_bw_tbps", path, _positive(r), 0.0),
        interconnect=ic,
        supported_dtypes=dtypes,
        thermal=r.optional(f, "thermal", path, lambda n, p: _thermal(r, n, p), None),
    )


def _peaks(r: Reader, node: Node, f: dict[str, Node], path: str, dtypes: tuple[str, ...]) -> dict[str, float]:
    """A chip's dense peak TFLOPS per number format: `peak_tflops: {bf16, fp8, fp4, int8}`, with
    `peak_tflops_bf16` as the bf16 entry; bf16 is required one way or the other, and once."""
    peaks: dict[str, float] = {}
    if "peak_tflops" in f:
        g = r.mapping(f["peak_tflops"], f"{path}.peak_tflops", required=(), optional=PEAK_FORMATS)
        peaks = {k: r.number(v, f"{path}.peak_tflops.{k}", gt=0) for k, v in g.items()}
        for k, v in g.items():
            if dtypes and k not in dtypes:
                r.fail(v, f"{path}.peak_tflops.{k}", f"a peak for {k}, which supported_dtypes does not list "
                       f"({', '.join(dtypes)}): add {k} there or drop this peak")
    if "peak_tflops_bf16" in f:
        bf16 = r.number(f["peak_tflops_bf16"], f"{path}.peak_tflops_bf16", gt=0)
        if "bf16" in peaks and peaks["bf16"] != bf16:
            r.fail(f["peak_tflops_bf16"], f"{path}.peak_tflops_bf16", f"{bf16:g} disagrees with peak_tflops.bf16 "
                   f"{peaks['bf16']:g}: give the bf16 peak once")
        peaks["bf16"] = bf16
    elif "bf16" not in peaks:
        r.fail(f.get("peak_tflops", node), f"{path}.peak_tflops_bf16" if "peak_tflops" not in f else
               f"{path}.peak_tflops.bf16", "missing required field (the bf16 peak: peak_tflops_bf16, or bf16 in "
               "peak_tflops)")
    return peaks


def _link(r: Reader, node: Node, path: str) -> Interconnect:
    """A device link or node network: its kind, GB/s per device each way, and optional latency per collective."""
    g = r.mapping(node, path, required=("kind", "bw_gbps"), optional=("latency_us",))
    return Interconnect(kind=r.optional(g, "kind", path, r.string, ""),
                        bw_gbps=r.optional(g, "bw_gbps", path, _positive(r), 0.0),
                        latency_us=r.optional(g, "latency_us", path, lambda n, p: r.number(n, p, ge=0), 0.0))


def _thermal(r: Reader, node: Node, path: str) -> Thermal:
    f = r.mapping(node, path, required=("warning_c", "critical_c"))
    limits = Thermal(warning_c=r.optional(f, "warning_c", path, _positive(r), 0.0),
                     critical_c=r.optional(f, "critical_c", path, _positive(r), 0.0))
    if 0 < limits.critical_c <= limits.warning_c:
        r.fail(f["critical_c"], f"{path}.critical_c",
               f"critical limit {limits.critical_c:g} °C must be above the warning limit {limits.warning_c:g} °C")
    return limits


def _positive(r: Reader) -> Callable[[Node, str], float]:
    return lambda n, p: r.number(n, p, gt=0)


def _count(r: Reader) -> Callable[[Node, str], int]:
    return lambda n, p: r.integer(n, p, gt=0)


def _model(r: Reader, path: str, node: Node) -> Model:
    f = r.mapping(node, path, required=(
        "id", "total_params_b", "active_params_b", "bytes_per_param", "layers", "kv_heads", "head_dim",
        "max_context",
    ), optional=("kv_bytes_per_elem", "requires", "dtype", *SHAPE_FIELDS, "vision"))
    requires: dict[str, str] = r.optional(f, "requires", path, r.string_map, {})
    for component, spec in requires.items():
        try:
            parse_specifier(spec)
        except SpecifierError as exc:
            r.fail(f["requires"], f"{path}.requires.{component}", str(exc))
    model = Model(
        id=r.optional(f, "id", path, lambda n, p: _ident(r, n, p), ""),
        total_params_b=r.optional(f, "total_params_b", path, _positive(r), 0.0),
        active_params_b=r.optional(f, "active_params_b", path, _positive(r), 0.0),
        bytes_per_param=r.optional(f, "bytes_per_param", path, _positive(r), 0.0),
        layers=r.optional(f, "layers", path, _count(r), 0),
        kv_heads=r.optional(f, "kv_heads", path, _count(r), 0),
        head_dim=r.optional(f, "head_dim", path, _count(r), 0),
        max_context=r.optional(f, "max_context", path, _count(r), 0),
        kv_bytes_per_elem=r.optional(f, "kv_bytes_per_elem", path, _positive(r), 2.0),
        requires=requires,
        dtype=r.optional(f, "dtype", path, lambda n, p: r.choice(n, p, DTYPES), None),
        hidden_size=r.optional(f, "hidden_size", path, _count(r), 0),
        attention_heads=r.optional(f, "attention_heads", path, _count(r), 0),
        experts=r.optional(f, "experts", path, _count(r), 0),
        experts_per_token=r.optional(f, "experts_per_token", path, _count(r), 0),
        vision=r.optional(f, "vision", path, lambda n, p: read_vision(r, n, p), None),
        compute_dtype=r.optional(f, "compute_dtype", path, lambda n, p: r.choice(n, p, PEAK_FORMATS), None),
        kv_lora_rank=r.optional(f, "kv_lora_rank", path, _count(r), 0),
        qk_rope_head_dim=r.optional(f, "qk_rope_head_dim", path, _count(r), 0),
        full_attention_layers=r.optional(f, "full_attention_layers", path, _count(r), 0),
    )
    if model.active_params_b > model.total_params_b > 0:
        r.fail(f["active_params_b"], f"{path}.active_params_b",
               f"active params ({model.active_params_b:g}B) exceed total params ({model.total_params_b:g}B)")
    _check_shape(r, f, path, model)
    return model


SHAPE_FIELDS = ("hidden_size", "attention_heads", "experts", "experts_per_token", "compute_dtype", "kv_lora_rank",
                "qk_rope_head_dim", "full_attention_layers")


def _check_shape(r: Reader, f: dict[str, Node], path: str, m: Model) -> None:
    """The optional shape fields agree with each other and with the parameter counts."""
    if m.full_attention_layers > m.layers > 0:
        r.fail(f["full_attention_layers"], f"{path}.full_attention_layers",
               f"{m.full_attention_layers} full-attention layers exceed the model's {m.layers} layers")
    if m.qk_rope_head_dim and not m.kv_lora_rank:
        r.fail(f["qk_rope_head_dim"], f"{path}.kv_lora_rank", "qk_rope_head_dim is MLA's: give kv_lora_rank, the "
               "latent's width, too")
    if m.attention_heads and m.kv_heads and m.attention_heads % m.kv_heads:
        r.fail(f["attention_heads"], f"{path}.attention_heads",
               f"{m.attention_heads} attention heads are not a multiple of the {m.kv_heads} KV heads")
    if bool(m.experts) != bool(m.experts_per_token):
        given, missing = ("experts", "experts_per_token") if m.experts else ("experts_per_token", "experts")
        r.fail(f[given], f"{path}.{missing}", f"{given} is given, so {missing} is expected too")
    elif m.experts:
        if m.experts_per_token > m.experts:
            r.fail(f["experts_per_token"], f"{path}.experts_per_token",
                   f"{m.experts_per_token} experts per token exceed the model's {m.experts} experts")
        elif not m.moe:
            r.fail(f["experts"], f"{path}.experts", f"experts are given, but active params "
                   f"({m.active_params_b:g}B) equal total params: a MoE model uses fewer per token")
        elif m.experts_per_token == m.experts:
            r.fail(f["experts_per_token"], f"{path}.experts_per_token",
                   f"every one of the {m.experts} experts per token leaves no inactive parameters, but active "
                   f"params ({m.active_params_b:g}B) are below total ({m.total_params_b:g}B)")


def _pool(r: Reader, path: str, node: Node) -> Pool:
    f = r.mapping(node, path, required=(
        "id", "chip", "devices", "devices_per_node", "hourly_cost_per_device", "exporter", "assign",
        "cost_model",
    ), optional=("stack", "serving", "onboarding", "network"))
    pool_id, chip, devices, per_node, cost, exporter = r.fields(f, path, POOL_FIELDS)
    for key, value in (("id", pool_id), ("exporter", exporter)):
        _check_ident(r, f, path, key, value)
    pool = Pool(
        id=pool_id, chip=chip, devices=devices, devices_per_node=per_node, hourly_cost_per_device=cost,
        exporter=exporter,
        assign=r.optional(f, "assign", path, lambda n, p: _assign(r, n, p), _NO_ASSIGNMENT),
        stack=r.optional(f, "stack", path, r.string_map, {}),
        serving=r.optional(f, "serving", path, lambda n, p: _serving(r, n, p), None),
        cost_model=r.optional(f, "cost_model", path, lambda n, p: _cost_model(r, n, p), _NO_COST_MODEL),
        onboarding=r.optional(f, "onboarding", path, lambda n, p: _onboarding(r, n, p), _IN_PRODUCTION),
        network=r.optional(f, "network", path, lambda n, p: _link(r, n, p), None),
    )
    if pool.devices and pool.devices_per_node > pool.devices:
        r.fail(f["devices_per_node"], f"{path}.devices_per_node",
               f"{pool.devices_per_node} devices per node exceeds the pool's {pool.devices} devices")
    if pool.serving and pool.devices:
        need = pool.serving.replicas * pool.serving.devices_per_replica
        if need > pool.devices:
            r.fail(f["serving"], f"{path}.serving",
                   f"{pool.serving.replicas} replicas x {pool.serving.devices_per_replica} devices = {need} "
                   f"exceeds the pool's {pool.devices} devices")
    return pool


POOL_FIELDS = (Field("id", "text", ""), Field("chip", "text", ""), Field("devices", "integer", 0, gt=0),
               Field("devices_per_node", "integer", 0, gt=0), Field("hourly_cost_per_device", "number", 0.0, gt=0),
               Field("exporter", "text", ""))
_NO_ASSIGNMENT, _NO_COST_MODEL, _IN_PRODUCTION = Assignment(), CostModel(0.0, 0.0), Onboarding("production")


def _check_ident(r: Reader, f: dict[str, Node], path: str, key: str, value: str) -> None:
    if value and not _ID.match(value):
        r.fail(f[key], f"{path}.{key}", f"bad id {value!r}; use lower-case letters, digits, '.', '_' and '-'")


def _assign(r: Reader, node: Node, path: str) -> Assignment:
    f = r.mapping(node, path, required=(), optional=("node_pattern", "node_patterns", "labels"))
    patterns: tuple[str, ...] = ()
    if "node_pattern" in f:
        patterns = (r.string(f["node_pattern"], f"{path}.node_pattern"),)
    if "node_patterns" in f:
        patterns += r.string_list(f["node_patterns"], f"{path}.node_patterns")
    labels: dict[str, str] = r.optional(f, "labels", path, r.string_map, {})
    if not f and r.empty_mapping(node):
        r.fail(node, path, "expected node_pattern, node_patterns or labels")
    return Assignment(node_patterns=patterns, labels=labels)


ENGINE_FIELDS = ("pp", "max_num_batched_tokens", "gpu_memory_utilization", "kv_cache_dtype", "step_overhead_ms",
                 "seq_overhead_us", "chunk_overhead_us", "ep", "attention_dp", "schedule", "async_scheduling")


SERVING_FIELDS = (
    Field("model", "text", ""), Field("engine", "string", "vllm"), Field("replicas", "integer", 0, gt=0),
    Field("devices_per_replica", "integer", 0, gt=0), Field("max_concurrency", "integer", 0, gt=0),
    Field("max_queue", "integer", 1024, ge=0), Field("pp", "integer", 1, gt=0),
    Field("max_num_batched_tokens", "integer", 8192, gt=0),
    Field("gpu_memory_utilization", "number", 0.9, gt=0, le=1),
    Field("kv_cache_dtype", "choice", "auto", options=tuple(KV_CACHE_DTYPES)),
    Field("step_overhead_ms", "number", 0.0, ge=0), Field("seq_overhead_us", "number", 0.0, ge=0),
    Field("chunk_overhead_us", "number", 0.0, ge=0), Field("ep", "integer", 1, gt=0),
    Field("attention_dp", "integer", 1, gt=0),
    Field("schedule", "choice", "decode_first", options=SCHEDULES),
    Field("async_scheduling", "boolean", False),
)
SERVING_KEYS = tuple(fd.key for fd in SERVING_FIELDS)  # Serving's own field names


def _serving(r: Reader, node: Node, path: str) -> Serving:
    f = r.mapping(node, path, required=("model", "replicas", "devices_per_replica", "max_concurrency"),
                  optional=("engine", "max_queue", *ENGINE_FIELDS))
    serving = Serving(**dict(zip(SERVING_KEYS, r.fields(f, path, SERVING_FIELDS), strict=True)))
    check_engine(r, node, f, path, serving)
    return serving


def check_engine(r: Reader, node: Node, fields: dict[str, Node], path: str, s: Serving) -> None:
    """Cross-field rules of a serving config: whole pipeline stages, and a step budget that fits every sequence."""
    if s.pp and s.devices_per_replica and s.devices_per_replica % s.pp:
        r.fail(fields.get("pp", node), f"{path}.pp", f"{s.devices_per_replica} devices per replica do not split into "
                                               f"{s.pp} pipeline stages of equal width")
    if s.attention_dp > 1 and (s.tp % s.attention_dp or s.ep < 2):
        r.fail(fields.get("attention_dp", node), f"{path}.attention_dp",
               f"{s.attention_dp} data-parallel attention groups need a TP degree they divide (TP{s.tp}) and "
               f"expert-parallel experts (ep > 1, got {s.ep})")
    if s.ep > 1 and s.devices_per_replica and s.devices_per_replica % s.ep:
        r.fail(fields.get("ep", node), f"{path}.ep", f"{s.devices_per_replica} devices per replica do not split into "
                                               f"{s.ep} expert-parallel groups of equal size")
    if s.max_num_batched_tokens and s.max_concurrency and s.max_num_batched_tokens < s.max_concurrency:
        r.fail(fields.get("max_num_batched_tokens", node), f"{path}.max_num_batched_tokens",
               f"{s.max_num_batched_tokens} tokens per step cannot decode max_concurrency {s.max_concurrency} "
               "sequences at once; it must be at least max_concurrency")


def _cost_model(r: Reader, node: Node, path: str) -> CostModel:
    f = r.mapping(node, path, required=("mfu", "mem_bw_eff"), optional=("mfu_decode", "collective_us",
                                                                                       "serial_share"))
    return CostModel(*r.fields(f, path, COST_FIELDS))


COST_FIELDS = (Field("mfu", "number", 0.0, gt=0, le=1), Field("mem_bw_eff", "number", 0.0, gt=0, le=1),
               Field("mfu_decode", "number", None, gt=0, le=1), Field("collective_us", "number", None, ge=0),
               Field("serial_share", "number", 0.0, ge=0, le=1))


def _onboarding(r: Reader, node: Node, path: str) -> Onboarding:
    f = r.mapping(node, path, required=("stage",), optional=("started", "evidence", "checks"))
    evidence: dict[str, str] = r.optional(f, "evidence", path, r.string_map, {})
    for stage in evidence:
        if stage not in ONBOARDING_STAGES:
            r.fail(f["evidence"], f"{path}.evidence.{stage}",
                   f"unknown stage '{stage}'; expected one of: {', '.join(ONBOARDING_STAGES)}")
    return Onboarding(
        stage=r.optional(f, "stage", path, lambda n, p: r.choice(n, p, ONBOARDING_STAGES), "production"),
        started=r.optional(f, "started", path, r.date, None),
        evidence=evidence,
        checks=r.optional(f, "checks", path, lambda n, p: read_checks(r, n, p), {}),
    )


def _check_ids(r: Reader, seq: Node | None, path: str, ids: list[str]) -> None:
    seen: dict[str, int] = {}
    nodes = r.elements(seq)
    for i, item_id in enumerate(ids):
        if not item_id:
            continue
        if item_id in seen:
            line = (r.line(nodes[seen[item_id]]) if nodes else None) or "?"
            r.fail(r.field(nodes[i], "id") if nodes else None, f"{path}[{i}].id",
                   f"duplicate id '{item_id}' (first defined at line {line})")
        else:
            seen[item_id] = i


def _check_refs(r: Reader, top: dict[str, Node], chips: tuple[Chip, ...], models: tuple[Model, ...],
                pools: tuple[Pool, ...]) -> None:
    chip_ids = [c.id for c in chips]
    model_ids = [m.id for m in models]
    pool_nodes = r.elements(top.get("pools"))
    for i, pool in enumerate(pools):
        item = pool_nodes[i] if i < len(pool_nodes) else None
        if pool.chip and pool.chip not in chip_ids:
            r.fail(r.field(item, "chip"), f"pools[{i}].chip",
                   f"unknown chip '{pool.chip}'; known: {', '.join(chip_ids) or '(none)'}")
        if pool.serving and pool.serving.model and pool.serving.model not in model_ids:
            r.fail(r.field(r.field(item, "serving"), "model"), f"pools[{i}].serving.model",
                   f"unknown model '{pool.serving.model}'; known: {', '.join(model_ids) or '(none)'}")
