"""Fuzz sweep of the YAML loaders: registry, vendor profile, status rules, serve config, candidate and roles.

Each loader gets mutated seeds (the examples/ and shipped files, and small documents written here) and must
either load them or raise its own error class, whose every line names the file (and the line where there is
one); never another exception.
"""

from __future__ import annotations

import re
from pathlib import Path

from hypothesis import given

from access.roles import RolesError, load_roles_text
from app.serve.config import ServeConfigError, load_serve_text
from normalizers.exceptions import ProfileError
from normalizers.profile.loader import load_profile_text
from pool_registry import Registry, RegistryError, load_registry, load_registry_text
from pool_registry.yamlread import ConfigError
from replay.candidate_loader import load_candidate_text
from replay.exceptions import CandidateError
from status.rules import RulesError, load_rules_text
from tests.conftest import FLEET, REPO
from tests.fuzzing import cases, mutated, repo_files, text_of

# Registry: a small fleet (the example fleet costs ~10x as much per case), and the example fleet itself.
SMALL_FLEET = b"""\
version: 1
name: small
chips:
  - id: h100-sxm
    vendor: nvidia
    peak_tflops_bf16: 989
    hbm_capacity_gb: 80
    hbm_bw_tbps: 3.35
    interconnect: {kind: nvlink4, bw_gbps: 450}
    supported_dtypes: [bf16, fp8]
models:
  - id: m
    total_params_b: 70.6
    active_params_b: 70.6
    bytes_per_param: 2
    layers: 80
    kv_heads: 8
    head_dim: 128
    max_context: 131072
    dtype: bf16
    requires: {vllm: ">=0.15,<0.16"}
pools:
  - id: p1
    chip: h100-sxm
    devices: 16
    devices_per_node: 8
    hourly_cost_per_device: 3.20
    exporter: dcgm
    assign: {node_pattern: "h100-a-*"}
    stack: {driver: "550.144.03", vllm: "0.15.1"}
    serving: {model: m, engine: vllm, replicas: 4, devices_per_replica: 4, max_concurrency: 64}
    cost_model: {mfu: 0.45, mem_bw_eff: 0.75}
    onboarding: {stage: production, started: 2025-03-03}
"""
FLEET_SEEDS = [SMALL_FLEET, FLEET.read_bytes()]
PROFILE_SEEDS = [*repo_files("normalizers/profiles/*.yaml"), b"""\
profile: x
vendor: x
detect: [x_]
node_labels: [host]
device_labels: [gpu]
metrics:
  x_util: {metric: accelerator.utilization, unit: percent, min: 0, max: 100, reject_values: {-1: "n/a"}}
  x_health: {metric: accelerator.health, unit: bool, values: {2: 1, 1: 0}}
derived:
  - {metric: accelerator.memory.total, sum: [x_used, x_free], unit: MiB}
errors:
  x_xid: {kind: sticky_code, default: unknown/recoverable, codes: {8: application/recoverable}}
"""]
RULES_SEEDS = [*repo_files("status/rules.yaml", "examples/site-rules.yaml")]
SERVE_SEEDS = repo_files("examples/serve.yaml")
CANDIDATE_SEEDS = repo_files("examples/candidates/*.yaml")
WHERE = re.compile(r"^(?P<file>[^:]+)(?::\d+)?: ")


def named(exc: ConfigError, file: str) -> None:
    """Every problem line starts with the file (and a line number where there is one)."""
    lines = str(exc).splitlines()
    assert lines, "an error without a message"
    for line in lines:
        m = WHERE.match(line)
        assert m is not None and m.group("file") == file, line


@cases(50, path="yaml", sweep=2000)
@given(mutated(FLEET_SEEDS))
def test_registry_loader(data: bytes) -> None:
    try:
        load_registry_text(text_of(data), "fleet.yaml")
    except RegistryError as exc:
        named(exc, "fleet.yaml")


def test_registry_file_that_is_not_utf8_is_one_error(tmp_path: Path) -> None:
    path = tmp_path / "fleet.yaml"
    path.write_bytes(SMALL_FLEET.replace(b"vendor", b"vend\xffor"))
    try:
        load_registry(path)
    except RegistryError as exc:
        assert str(exc).startswith(f"{path}: not UTF-8 text")
    else:
        raise AssertionError("loaded")


@cases(75, path="yaml", sweep=1600)
@given(mutated(PROFILE_SEEDS))
def test_profile_loader(data: bytes) -> None:
    try:
        load_profile_text(text_of(data), "x.yaml", file_name="x.yaml")
    except ProfileError as exc:
        named(exc, "x.yaml")


@cases(75, path="yaml", sweep=1600)
@given(mutated(RULES_SEEDS))
def test_status_rules_loader(data: bytes) -> None:
    try:
        load_rules_text(text_of(data), "rules.yaml")
    except RulesError as exc:
        named(exc, "rules.yaml")


@cases(75, path="yaml", sweep=1600)
@given(mutated(SERVE_SEEDS))
def test_serve_config_loader(data: bytes) -> None:
    try:
        load_serve_text(text_of(data), "serve.yaml", REPO / "examples")
    except ServeConfigError as exc:
        named(exc, "serve.yaml")


_FLEET: list[Registry] = []


def fleet() -> Registry:
    if not _FLEET:
        _FLEET.append(load_registry(FLEET))
    return _FLEET[0]


@cases(75, path="yaml", sweep=1600)
@given(mutated(CANDIDATE_SEEDS))
def test_candidate_loader(data: bytes) -> None:
    try:
        load_candidate_text(text_of(data), fleet(), "c.yaml")
    except CandidateError as exc:
        named(exc, "c.yaml")


def test_a_control_character_is_one_line_naming_line_and_column() -> None:
    # once two lines, the second pointing into "<unicode string>" rather than the file
    try:
        load_registry_text(SMALL_FLEET.decode().replace("name: small", "name: sm\x03all"), "fleet.yaml")
    except RegistryError as exc:
        assert str(exc) == "fleet.yaml:2: YAML syntax error: character U+0003 at column 9 is not allowed in YAML"
    else:
        raise AssertionError("loaded")


@cases(75, path="yaml", sweep=1600)
@given(mutated(repo_files("examples/roles.yaml")))
def test_roles_loader(data: bytes) -> None:
    try:
        load_roles_text(text_of(data), "roles.yaml")
    except RolesError as exc:
        named(exc, "roles.yaml")
