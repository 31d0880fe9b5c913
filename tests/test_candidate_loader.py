"""Candidate YAML: validated against the fleet like the registry, every problem with file, line and path."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from pool_registry import Registry
from replay import CandidateError, PoolOverride, SlaTier, candidate_to_dict, load_candidate, load_candidate_text
from replay.fleet import resolve_pools
from tests.conftest import REPO

GOOD = """\
name: what-if
policy: sla_cost
overflow: degrade
noise: 0.1
drain_s: 300
sla_tiers:
  standard: {ttft_s: 2.0, e2e_s: 60}
  batch: {e2e_s: 600}
pools:
  h100-a: {replicas: 8, mfu: 0.5, hourly_cost_per_device: 2.5}
  mlu370-a: {enabled: false}
"""


def test_a_full_candidate_loads(fleet: Registry) -> None:
    c = load_candidate_text(GOOD, fleet, "c.yaml")
    assert (c.name, c.policy, c.overflow, c.noise, c.drain_s) == ("what-if", "sla_cost", "degrade", 0.1, 300.0)
    assert c.sla_tiers == {"standard": SlaTier(2.0, 60.0), "batch": SlaTier(None, 600.0)}
    assert c.pools["h100-a"] == PoolOverride(replicas=8, mfu=0.5, hourly_cost_per_device=2.5)
    specs = {p.id: p for p in resolve_pools(fleet, c)}
    assert "mlu370-a" not in specs
    h100 = specs["h100-a"]
    assert (h100.replicas, h100.mfu, h100.mem_bw_eff, h100.hourly_cost_per_device, h100.max_concurrency) == (
        8, 0.5, 0.75, 2.5, 64)  # untouched fields keep the registry's values


def test_candidate_round_trips_through_its_dict(fleet: Registry) -> None:
    c = load_candidate_text(GOOD, fleet, "c.yaml")
    assert load_candidate_text(yaml.safe_dump(candidate_to_dict(c)), fleet) == c
    spread = load_candidate_text(GOOD + "step_time_spread: {h100-a: 1.08}\n", fleet, "c.yaml")
    assert spread.step_time_spread == {"h100-a": 1.08}
    assert load_candidate_text(yaml.safe_dump(candidate_to_dict(spread)), fleet) == spread


@pytest.mark.parametrize("path", sorted((REPO / "examples" / "candidates").glob("*.yaml")), ids=lambda p: p.name)
def test_example_candidates_are_valid(fleet: Registry, path: Path) -> None:
    assert load_candidate(path, fleet).policy


@pytest.mark.parametrize(("text", "expected"), [
    ("policy: lor2\n", "c.yaml:1: policy: unknown policy 'lor2'; known: round_robin, least_loaded, cost_min, "
                       "sla_cost, pd_split"),
    ("policy: sla_cost\npools:\n  h200-a: {replicas: 2}\n",
     "c.yaml:3: pools.h200-a: unknown pool 'h200-a'; known: h100-a, mi300x-a, ascend-a, gaudi3-a, mlu370-a"),
    ("policy: sla_cost\nstep_time_spread: {h100-a: 0.9}\n",
     "c.yaml:2: step_time_spread.h100-a: must be >= 1, got 0.9"),
    ("policy: sla_cost\nstep_time_spread: {h200-a: 1.1}\n",
     "c.yaml:2: step_time_spread.h200-a: unknown pool 'h200-a'; known: h100-a, mi300x-a, ascend-a, gaudi3-a, mlu370-a"),
    ("policy: sla_cost\noverflow: drop\n",
     "c.yaml:2: overflow: unknown value 'drop'; expected one of: queue, reject, degrade"),
    ("policy: sla_cost\npools:\n  h100-a: {replicas: 0}\n", "c.yaml:3: pools.h100-a.replicas: must be >= 1, got 0"),
    ("policy: sla_cost\npools:\n  h100-a: {mfu: 1.5}\n", "c.yaml:3: pools.h100-a.mfu: must be <= 1, got 1.5"),
    ("policy: sla_cost\npools:\n  h100-a: {gpus: 3}\n", "c.yaml:3: pools.h100-a.gpus: unknown key 'gpus'"),
    ("policy: {name: pd_split, prefill: [h100-a]}\n",
     "c.yaml:1: policy: policy 'pd_split' needs a non-empty 'decode' list of pool ids"),
    ("policy: {name: pd_split, prefill: [h999], decode: [ascend-a]}\n",
     "c.yaml:1: policy.prefill[0]: unknown pool 'h999'; known: h100-a"),
    ("policy: sla_cost\nsla_tiers:\n  standard: {ttft: 2}\n",
     "c.yaml:3: sla_tiers.standard.ttft: unknown key 'ttft'; did you mean 'ttft_s'?"),
    ("policy: sla_cost\nsla_tiers:\n  standard: {ttft_s: -1}\n",
     "c.yaml:3: sla_tiers.standard.ttft_s: must be > 0, got -1"),
    ("policy: cost_min\nnoise: lots\n", "c.yaml:2: noise: expected a number, got 'lots' (string)"),
    ("name: x\n", "c.yaml:1: policy: missing required field"),
    ("policy: sla_cost\npools:\n  h100-a: {pp: 0}\n", "c.yaml:3: pools.h100-a.pp: must be >= 1, got 0"),
    ("policy: sla_cost\npools:\n  h100-a: {max_num_batched_tokens: 1.5}\n",
     "c.yaml:3: pools.h100-a.max_num_batched_tokens: expected an integer, got '1.5' (number)"),
    ("policy: sla_cost\npools:\n  h100-a: {gpu_memory_utilization: 0}\n",
     "c.yaml:3: pools.h100-a.gpu_memory_utilization: must be > 0, got 0"),
    ("policy: sla_cost\npools:\n  h100-a: {kv_cache_dtype: int3}\n",
     "c.yaml:3: pools.h100-a.kv_cache_dtype: unknown value 'int3'"),
    ("policy: sla_cost\npools:\n  h100-a: {step_overhead_ms: -2}\n",
     "c.yaml:3: pools.h100-a.step_overhead_ms: must be >= 0, got -2"),
    ("policy: sla_cost\npools:\n  h100-a: {serial_share: 1.2}\n",
     "c.yaml:3: pools.h100-a.serial_share: must be <= 1, got 1.2"),
    ("policy: sla_cost\npools:\n  h100-a: {async_scheduling: 1}\n",
     "c.yaml:3: pools.h100-a.async_scheduling: expected true or false, got '1' (integer)"),
    ("policy: sla_cost\npools:\n  h100-a: {replicas_scale: 0}\n",
     "c.yaml:3: pools.h100-a.replicas_scale: must be > 0, got 0"),
    ("", "c.yaml: empty file; expected a mapping with at least 'policy'"),
    ("policy: [\n", "c.yaml:2: YAML syntax error"),
])
def test_invalid_candidates_are_refused_helpfully(fleet: Registry, text: str, expected: str) -> None:
    with pytest.raises(CandidateError) as exc:
        load_candidate_text(text, fleet, "c.yaml")
    assert any(str(p).startswith(expected) for p in exc.value.problems), [str(p) for p in exc.value.problems]


def test_engine_overrides_and_relative_replicas(fleet: Registry) -> None:
    text = ("policy: sla_cost\npools:\n  h100-a: {replicas_scale: 0.5, pp: 2, max_num_batched_tokens: 2048,"
            " kv_cache_dtype: fp8, step_overhead_ms: 3, gpu_memory_utilization: 0.8, async_scheduling: true}\n")
    c = load_candidate_text(text, fleet, "c.yaml")
    pools = {p.id: p for p in resolve_pools(fleet, c)}
    h100 = pools["h100-a"]
    assert (h100.replicas, h100.pp, h100.max_num_batched_tokens, h100.kv_cache_dtype) == (8, 2, 2048, "fp8")
    assert (h100.step_overhead_ms, h100.gpu_memory_utilization, h100.async_scheduling) == (3.0, 0.8, True)
    assert not any(p.async_scheduling for i, p in pools.items() if i != "h100-a")  # the registry's: off
    assert load_candidate_text(yaml.safe_dump(candidate_to_dict(c)), fleet) == c


def test_every_problem_is_reported_at_once(fleet: Registry) -> None:
    text = "policy: lor2\noverflow: drop\npools:\n  nope: {}\n  h100-a: {replicas: -1}\n"
    with pytest.raises(CandidateError) as exc:
        load_candidate_text(text, fleet, "c.yaml")
    assert [p.line for p in exc.value.problems] == [1, 2, 4, 5]


def test_a_missing_candidate_file_is_named(fleet: Registry, tmp_path: Path) -> None:
    with pytest.raises(CandidateError, match=r"nope\.yaml: file not found"):
        load_candidate(tmp_path / "nope.yaml", fleet)
