"""Registry loading: the example fleet, a table of broken files, and the snapshot round trip."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pool_registry import (
    Registry,
    RegistryError,
    load_registry,
    load_registry_text,
    registry_from_json,
    registry_to_dict,
    registry_to_json,
)

VALID = """\
name: tiny
chips:
  - id: h100
    vendor: nvidia
    peak_tflops_bf16: 989
    hbm_capacity_gb: 80
    hbm_bw_tbps: 3.35
    interconnect: {kind: nvlink4, bw_gbps: 450}
    supported_dtypes: [bf16, fp8]
models:
  - id: m70
    total_params_b: 70
    active_params_b: 70
    bytes_per_param: 2
    layers: 80
    kv_heads: 8
    head_dim: 128
    max_context: 8192
    requires: {vllm: ">=0.15,<0.16"}
pools:
  - id: p1
    chip: h100
    devices: 16
    devices_per_node: 8
    hourly_cost_per_device: 3.0
    exporter: dcgm
    assign: {node_pattern: "p1-*"}
    serving: {model: m70, replicas: 2, devices_per_replica: 8, max_concurrency: 32}
    cost_model: {mfu: 0.4, mem_bw_eff: 0.7}
"""


def test_valid_text_loads_with_exact_values() -> None:
    reg = load_registry_text(VALID, "tiny.yaml")
    assert reg.name == "tiny"
    pool = reg.pool("p1")
    assert pool.nodes == 2
    assert pool.hourly_cost == pytest.approx(48.0)
    assert reg.chip_of(pool).interconnect.bw_gbps == 450
    model = reg.model("m70")
    # 70e9 params x 2 bytes; K and V x 80 layers x 8 heads x 128 dims x 2 bytes per token.
    assert model.weight_bytes == pytest.approx(140e9)
    assert model.kv_bytes_per_token == 2 * 80 * 8 * 128 * 2
    assert pool.onboarding.stage == "production"


def test_example_fleet_has_the_promised_pools(fleet: Registry) -> None:
    vendors = {fleet.chip_of(p).vendor for p in fleet.pools}
    assert {"nvidia", "amd", "huawei", "intel", "cambricon"} <= vendors
    assert len(fleet.pools) >= 5
    onboarding = [p for p in fleet.pools if fleet.chip_of(p).vendor == "cambricon"]
    assert onboarding and onboarding[0].onboarding.stage != "production"
    dense = [m for m in fleet.models if m.active_params_b == m.total_params_b]
    moe = [m for m in fleet.models if m.active_params_b < m.total_params_b / 5]
    assert any(60 <= m.total_params_b <= 80 for m in dense)
    assert moe


def _swap(old: str, new: str) -> str:
    assert old in VALID, old
    return VALID.replace(old, new, 1)


def _checks(item: str) -> str:
    return _swap("    cost_model:", f"    onboarding:\n      stage: exporter\n      checks:\n        {item}\n"
                                  "    cost_model:")


# (name, text, line, path, reason fragment)
def _moe(extra: str) -> str:
    """The valid file with a MoE model (70B total, 7B active) and `extra` lines after its head_dim."""
    text = _swap("    head_dim: 128\n", "    head_dim: 128\n" + extra)
    return text.replace("active_params_b: 70", "active_params_b: 7")


INVALID = [
    ("no bf16 peak", _swap("    peak_tflops_bf16: 989\n", "    peak_tflops: {fp8: 1979}\n"), 5,
     "chips[0].peak_tflops.bf16", "missing required field (the bf16 peak: peak_tflops_bf16, or bf16 in peak_tflops)"),
    ("no peak at all", _swap("    peak_tflops_bf16: 989\n", ""), 3, "chips[0].peak_tflops_bf16",
     "missing required field (the bf16 peak"),
    ("bf16 peak twice, disagreeing", _swap("    peak_tflops_bf16: 989\n",
                                           "    peak_tflops_bf16: 989\n    peak_tflops: {bf16: 990}\n"), 5,
     "chips[0].peak_tflops_bf16", "989 disagrees with peak_tflops.bf16 990: give the bf16 peak once"),
    ("peak of an unknown format", _swap("    peak_tflops_bf16: 989\n", "    peak_tflops: {bf16: 989, fp9: 1}\n"), 5,
     "chips[0].peak_tflops.fp9", "unknown key 'fp9'"),
    ("peak of a format the chip lacks", _swap("    peak_tflops_bf16: 989\n", "    peak_tflops: {bf16: 989, fp4: 1}\n"),
     5, "chips[0].peak_tflops.fp4", "a peak for fp4, which supported_dtypes does not list (bf16, fp8)"),
    ("zero fp8 peak", _swap("    peak_tflops_bf16: 989\n", "    peak_tflops: {bf16: 989, fp8: 0}\n"), 5,
     "chips[0].peak_tflops.fp8", "must be > 0, got 0"),
    ("unknown compute format", _swap("    head_dim: 128\n", "    head_dim: 128\n    compute_dtype: fp6\n"), 18,
     "models[0].compute_dtype", "fp6"),
    ("unknown chip reference", _swap("chip: h100\n", "chip: h200\n"), 22, "pools[0].chip",
     "unknown chip 'h200'; known: h100"),
    ("unknown model reference", _swap("{model: m70,", "{model: m7,"), 28, "pools[0].serving.model",
     "unknown model 'm7'; known: m70"),
    ("duplicate chip id", VALID.replace("models:", "  - id: h100\n    vendor: amd\n    peak_tflops_bf16: 1\n"
     "    hbm_capacity_gb: 1\n    hbm_bw_tbps: 1\n    interconnect: {kind: x, bw_gbps: 1}\n"
     "    supported_dtypes: [bf16]\nmodels:"), 10, "chips[1].id", "duplicate id 'h100' (first defined at line 3)"),
    ("wrong type", _swap("devices: 16", "devices: sixteen"), 23, "pools[0].devices",
     "expected an integer, got 'sixteen' (string)"),
    ("float where integer", _swap("layers: 80", "layers: 80.5"), 15, "models[0].layers",
     "expected an integer, got '80.5' (number)"),
    ("negative capacity", _swap("hbm_capacity_gb: 80", "hbm_capacity_gb: -80"), 6, "chips[0].hbm_capacity_gb",
     "must be > 0, got -80"),
    ("zero cost", _swap("hourly_cost_per_device: 3.0", "hourly_cost_per_device: 0"), 25,
     "pools[0].hourly_cost_per_device", "must be > 0, got 0"),
    ("missing required field", _swap("    hbm_bw_tbps: 3.35\n", ""), 3, "chips[0].hbm_bw_tbps",
     "missing required field"),
    ("unknown key typo", _swap("    exporter: dcgm\n", "    exportr: dcgm\n"), 26, "pools[0].exportr",
     "unknown key 'exportr'; did you mean 'exporter'?"),
    ("yaml syntax error", _swap("devices: 16\n", "devices: [16\n"), 24, "",
     "YAML syntax error"),
    ("mfu above one", _swap("mfu: 0.4", "mfu: 1.4"), 29, "pools[0].cost_model.mfu", "must be <= 1, got 1.4"),
    ("unknown dtype", _swap("[bf16, fp8]", "[bf16, fp9]"), 9, "chips[0].supported_dtypes[1]",
     "unknown dtype 'fp9'"),
    ("active above total", _swap("active_params_b: 70", "active_params_b: 700"), 13, "models[0].active_params_b",
     "active params (700B) exceed total params (70B)"),
    ("replicas exceed devices", _swap("replicas: 2,", "replicas: 3,"), 28, "pools[0].serving",
     "3 replicas x 8 devices = 24 exceeds the pool's 16 devices"),
    ("bad version requirement", _swap('">=0.15,<0.16"', '"at least 0.15"'), 19, "models[0].requires.vllm",
     "bad version requirement 'at least 0.15'"),
    ("duplicate yaml key", _swap("    devices: 16\n", "    devices: 16\n    devices: 8\n"), 24,
     "pools[0].devices", "duplicate key (first at line 23)"),
    ("unknown onboarding stage", _swap("    cost_model:", "    onboarding: {stage: shipping}\n    cost_model:"),
     29, "pools[0].onboarding.stage", "unknown value 'shipping'"),
    # onboarding checks: sign-offs, evidence files and bounds per checklist item (the item is on line 32)
    ("unknown checklist item", _checks("operator: {file: o.csv}"), 32, "pools[0].onboarding.checks.operator",
     "unknown checklist item 'operator'; expected one of: devices, capabilities"),
    ("sign-off without who", _checks("devices: {at: 2026-11-24}"), 32, "pools[0].onboarding.checks.devices.by",
     "missing required field"),
    ("sign-off with a bad result", _checks("devices: {by: a, at: 2026-11-24, result: maybe}"), 32,
     "pools[0].onboarding.checks.devices.result", "unknown value 'maybe'; expected one of: pass, fail"),
    ("evidence item without its file", _checks("operators: {at: 2026-11-25}"), 32,
     "pools[0].onboarding.checks.operators.file", "missing required field"),
    ("regression without a candidate", _checks("regression: {baseline: b.csv}"), 32,
     "pools[0].onboarding.checks.regression.candidate", "missing required field"),
    ("negative tolerance", _checks("benchmark: {file: b.csv, tolerance: -1}"), 32,
     "pools[0].onboarding.checks.benchmark.tolerance", "must be > 0, got -1"),
    ("sign-off key on an evidence item", _checks("operators: {file: o.csv, by: me}"), 32,
     "pools[0].onboarding.checks.operators.by", "unknown key 'by'"),
    ("pools not a list", VALID.split("pools:")[0] + "pools: p1\n", 20, "pools", "expected a list, got 'p1'"),
    ("bad id characters", _swap("id: p1", "id: 'P 1'"), 21, "pools[0].id", "bad id 'P 1'"),
    ("empty file", "", None, "", "empty file"),
    # the engine's batching fields of a serving config
    ("pp not whole stages", _swap("max_concurrency: 32}", "max_concurrency: 32, pp: 3}"), 28, "pools[0].serving.pp",
     "8 devices per replica do not split into 3 pipeline stages of equal width"),
    ("pp zero", _swap("max_concurrency: 32}", "max_concurrency: 32, pp: 0}"), 28, "pools[0].serving.pp",
     "must be > 0, got 0"),
    ("step budget below concurrency", _swap("max_concurrency: 32}", "max_concurrency: 32, max_num_batched_tokens: 16}"),
     28, "pools[0].serving.max_num_batched_tokens", "16 tokens per step cannot decode max_concurrency 32"),
    ("memory utilization above one", _swap("max_concurrency: 32}", "max_concurrency: 32, gpu_memory_utilization: 1.2}"),
     28, "pools[0].serving.gpu_memory_utilization", "must be <= 1, got 1.2"),
    ("unknown kv cache dtype", _swap("max_concurrency: 32}", "max_concurrency: 32, kv_cache_dtype: fp4}"), 28,
     "pools[0].serving.kv_cache_dtype", "unknown value 'fp4'; expected one of: auto, bf16, fp16, fp8"),
    ("negative overhead", _swap("max_concurrency: 32}", "max_concurrency: 32, step_overhead_ms: -1}"), 28,
     "pools[0].serving.step_overhead_ms", "must be >= 0, got -1"),
    ("unknown schedule", _swap("max_concurrency: 32}", "max_concurrency: 32, schedule: prefill}"), 28,
     "pools[0].serving.schedule", "unknown value 'prefill'; expected one of: decode_first, prefill_first"),
    ("async scheduling not a boolean",
     _swap("max_concurrency: 32}", "max_concurrency: 32, async_scheduling: yes please}"), 28,
     "pools[0].serving.async_scheduling", "expected true or false, got 'yes please' (string)"),
    ("overhead not a number", _swap("max_concurrency: 32}", "max_concurrency: 32, step_overhead_ms: soon}"), 28,
     "pools[0].serving.step_overhead_ms", "expected a number, got 'soon' (string)"),
    # the step model's optional shape, layout and link fields
    ("negative sequence overhead", _swap("max_concurrency: 32}", "max_concurrency: 32, seq_overhead_us: -5}"), 28,
     "pools[0].serving.seq_overhead_us", "must be >= 0, got -5"),
    ("ep not whole groups", _swap("max_concurrency: 32}", "max_concurrency: 32, ep: 3}"), 28, "pools[0].serving.ep",
     "8 devices per replica do not split into 3 expert-parallel groups of equal size"),
    ("heads not a multiple of kv heads", _swap("    head_dim: 128\n", "    head_dim: 128\n    attention_heads: 12\n"),
     18, "models[0].attention_heads", "12 attention heads are not a multiple of the 8 KV heads"),
    ("hidden size zero", _swap("    head_dim: 128\n", "    head_dim: 128\n    hidden_size: 0\n"), 18,
     "models[0].hidden_size", "must be > 0, got 0"),
    ("experts without experts per token", _moe("    experts: 128\n"), 18, "models[0].experts_per_token",
     "experts is given, so experts_per_token is expected too"),
    ("more experts per token than experts", _moe("    experts: 8\n    experts_per_token: 9\n"), 19,
     "models[0].experts_per_token", "9 experts per token exceed the model's 8 experts"),
    ("experts on a dense model", _swap("    head_dim: 128\n", "    head_dim: 128\n    experts: 8\n"
                                       "    experts_per_token: 2\n"), 18, "models[0].experts",
     "experts are given, but active params (70B) equal total params"),
    ("negative link latency", _swap("bw_gbps: 450}", "bw_gbps: 450, latency_us: -1}"), 8,
     "chips[0].interconnect.latency_us", "must be >= 0, got -1"),
    ("network without bandwidth", _swap("    exporter: dcgm\n", "    exporter: dcgm\n    network: {kind: roce}\n"), 27,
     "pools[0].network.bw_gbps", "missing required field"),
    ("decode mfu above one", _swap("mfu: 0.4,", "mfu: 0.4, mfu_decode: 2,"), 29, "pools[0].cost_model.mfu_decode",
     "must be <= 1, got 2"),
    ("serial share above one", _swap("mfu: 0.4,", "mfu: 0.4, serial_share: 1.5,"), 29,
     "pools[0].cost_model.serial_share", "must be <= 1, got 1.5"),
    ("negative serial share", _swap("mfu: 0.4,", "mfu: 0.4, serial_share: -0.1,"), 29,
     "pools[0].cost_model.serial_share", "must be >= 0, got -0.1"),
]



def test_shape_layout_and_link_fields_load_derive_and_round_trip() -> None:
    text = (_moe("    attention_heads: 64\n    experts: 64\n    experts_per_token: 4\n")
            .replace("bw_gbps: 450}", "bw_gbps: 450, latency_us: 8}")
            .replace("    exporter: dcgm\n", "    exporter: dcgm\n    network: {kind: roce, bw_gbps: 50}\n")
            .replace("max_concurrency: 32}", "max_concurrency: 32, ep: 8, seq_overhead_us: 40}")
            .replace("mfu: 0.4,", "mfu: 0.4, mfu_decode: 0.2, collective_us: 12, serial_share: 0.4,"))
    reg = load_registry_text(text)
    m, p = reg.model("m70"), reg.pool("p1")
    assert (m.attention_heads, m.hidden, m.experts, m.experts_per_token, m.moe) == (64, 64 * 128, 64, 4, True)
    assert reg.chip("h100").interconnect.latency_us == 8 and p.network is not None and p.network.bw_gbps == 50
    assert p.serving is not None and (p.serving.ep, p.serving.seq_overhead_us) == (8, 40)
    assert (p.cost_model.mfu_decode, p.cost_model.collective_us, p.cost_model.serial_share) == (0.2, 12, 0.4)
    assert registry_from_json(registry_to_json(reg)) == reg
    # a file without them keeps its old defaults, and its snapshot names none of them
    old = load_registry_text(VALID)
    # no hidden_size nor heads: sqrt(70e9 / (12 x 80 layers)) = 8539.1, marked estimated
    assert old.model("m70").hidden == 8539 and old.model("m70").hidden_estimated and old.pool("p1").network is None
    snapshot = registry_to_json(old)
    for key in ("hidden_size", "attention_heads", "experts", "latency_us", "network", "ep", "seq_overhead_us",
                "mfu_decode", "collective_us", "serial_share"):
        assert f'"{key}"' not in snapshot


def test_onboarding_checks_load_with_defaults_and_round_trip() -> None:
    reg = load_registry_text(_checks("regression: {baseline: b.csv, candidate: c.csv, steps: [100, 500]}\n"
                                     "        devices: {by: wang.li, at: 2026-11-24, note: 16/16 in cnmon}\n"
                                     "        stability: {hours: 48}"))
    checks = reg.pool("p1").onboarding.checks
    assert checks["regression"].files == {"baseline": "b.csv", "candidate": "c.csv"}
    assert checks["regression"].steps == (100, 500) and checks["regression"].params == {"tolerance": 0.02}
    assert (checks["devices"].by, checks["devices"].at, checks["devices"].result) == (
        "wang.li", dt.date(2026, 11, 24), "pass")
    assert checks["stability"].params == {"hours": 48.0, "max_memory_growth": 0.05}
    assert registry_from_json(registry_to_json(reg)) == reg


def test_engine_fields_default_like_vllm_and_round_trip() -> None:
    reg = load_registry_text(VALID, "tiny.yaml")
    s = reg.pool("p1").serving
    assert s is not None
    assert (s.pp, s.max_num_batched_tokens, s.gpu_memory_utilization, s.kv_cache_dtype, s.step_overhead_ms) == (
        1, 8192, 0.9, "auto", 0.0)
    tuned = load_registry_text(_swap("max_concurrency: 32}", "max_concurrency: 32, pp: 2, max_num_batched_tokens: "
                                     "2048, gpu_memory_utilization: 0.85, kv_cache_dtype: fp8, step_overhead_ms: 4.5}"))
    t = tuned.pool("p1").serving
    assert t is not None and (t.pp, t.tp, t.max_num_batched_tokens, t.kv_cache_dtype) == (2, 4, 2048, "fp8")
    assert registry_from_json(registry_to_json(tuned)) == tuned
    assert s.schedule == "decode_first" and '"schedule"' not in registry_to_json(reg)  # vLLM's, unwritten
    sglang = load_registry_text(_swap("max_concurrency: 32}", "max_concurrency: 32, schedule: prefill_first}"))
    assert sglang.pool("p1").serving.schedule == "prefill_first"  # type: ignore[union-attr]
    assert registry_from_json(registry_to_json(sglang)) == sglang
    assert not s.async_scheduling and '"async_scheduling"' not in registry_to_json(reg)
    ahead = load_registry_text(_swap("max_concurrency: 32}", "max_concurrency: 32, async_scheduling: true}"))
    assert ahead.pool("p1").serving.async_scheduling is True  # type: ignore[union-attr]
    assert registry_from_json(registry_to_json(ahead)) == ahead


@pytest.mark.parametrize(("text", "line", "path", "reason"), [c[1:] for c in INVALID], ids=[c[0] for c in INVALID])
def test_invalid_registry_names_file_line_path_and_reason(text: str, line: int | None, path: str,
                                                          reason: str) -> None:
    with pytest.raises(RegistryError) as info:
        load_registry_text(text, "bad.yaml")
    matching = [p for p in info.value.problems if p.path == path and reason in p.message]
    assert matching, f"no problem at {path!r} with {reason!r}; got: {[str(p) for p in info.value.problems]}"
    assert matching[0].line == line
    assert matching[0].file == "bad.yaml"
    where = f"bad.yaml:{line}" if line else "bad.yaml"
    assert str(matching[0]).startswith(where)


def test_every_problem_is_reported_not_just_the_first() -> None:
    text = _swap("devices: 16", "devices: -1").replace("mfu: 0.4", "mfu: 2")
    with pytest.raises(RegistryError) as info:
        load_registry_text(text, "bad.yaml")
    paths = {p.path for p in info.value.problems}
    assert {"pools[0].devices", "pools[0].cost_model.mfu"} <= paths
    assert "(and 1 more problems)" in str(info.value) or "more problems" in str(info.value)


def test_missing_file_is_a_registry_error(tmp_path: Path) -> None:
    with pytest.raises(RegistryError, match="file not found"):
        load_registry(tmp_path / "nope.yaml")


def test_round_trip_yaml_dataclasses_json(fleet: Registry) -> None:
    again = registry_from_json(registry_to_json(fleet))
    assert again == fleet
    assert json.loads(registry_to_json(again)) == registry_to_dict(fleet)


@settings(max_examples=40, deadline=None)
@given(
    devices=st.integers(1, 4096), per_node=st.integers(1, 16), cost=st.floats(0.01, 100, allow_nan=False),
    mfu=st.floats(0.01, 1.0), patterns=st.lists(st.from_regex(r"[a-z]{1,6}-\*", fullmatch=True), min_size=1,
                                                max_size=3),
)
def test_round_trip_holds_for_generated_pools(devices: int, per_node: int, cost: float, mfu: float,
                                              patterns: list[str]) -> None:
    per_node = min(per_node, devices)
    text = (VALID.replace("devices: 16", f"devices: {devices}").replace("devices_per_node: 8",
            f"devices_per_node: {per_node}").replace("hourly_cost_per_device: 3.0",
            f"hourly_cost_per_device: {cost!r}").replace("mfu: 0.4", f"mfu: {mfu!r}")
            .replace('assign: {node_pattern: "p1-*"}', f"assign: {{node_patterns: {json.dumps(patterns)}}}")
            .replace("replicas: 2, devices_per_replica: 8", "replicas: 1, devices_per_replica: 1"))
    reg = load_registry_text(text)
    assert registry_from_json(registry_to_json(reg)) == reg
    assert reg.pools[0].assign.node_patterns == tuple(patterns)


def test_a_snapshot_is_read_as_the_json_it_is() -> None:
    # json writes 0.00001 as 1e-05, which YAML 1.1 would read as a string; the reader takes it as YAML 1.2 does
    reg = load_registry_text(_swap("mfu: 0.4,", "mfu: 0.4, collective_us: 0.00001,"))
    body = registry_to_json(reg)
    assert '"collective_us":1e-05' in body
    assert registry_from_json(body) == reg
    # what YAML 1.2 and JSON read as a number is one in a file too; a quoted one stays a string
    assert load_registry_text(_swap("mfu: 0.4,", "mfu: 0.4, collective_us: 1e-05,")) == reg
    with pytest.raises(RegistryError, match="expected a number, got '1e-05'"):
        load_registry_text(_swap("mfu: 0.4,", "mfu: 0.4, collective_us: '1e-05',"))
    assert reg.pools[0].cost_model.collective_us == pytest.approx(1e-5)


def test_a_snapshot_that_does_not_validate_names_its_line() -> None:
    body = registry_to_json(load_registry_text(VALID)).replace('"devices":16', '"devices":-16')
    with pytest.raises(RegistryError, match=r"snapshot #3:1: pools\[0\]\.devices: must be > 0, got -16"):
        registry_from_json(body, "snapshot #3")
