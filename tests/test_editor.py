"""The candidate form: registry values first, YAML the loader accepts, the loader's own messages when it does not."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pool_registry import Registry, load_registry
from replay import load_candidate, load_candidate_text
from replay.editor import DEFAULT_TIERS, CandidateForm, candidate_body, candidate_yaml, check_form, form_of
from replay.exceptions import CandidateError
from tests.conftest import FLEET, REPO

REGISTRY = load_registry(FLEET)


def test_a_fresh_form_is_the_registry_and_overrides_nothing(fleet: Registry) -> None:
    form = form_of(fleet)
    assert form.pools["h100-a"]["replicas"] == 16 and form.pools["h100-a"]["mfu"] == 0.45
    assert form.pools["gaudi3-a"]["hourly_cost_per_device"] == 2.10
    assert form.tiers == DEFAULT_TIERS and all(form.enabled.values())
    candidate, problems, text = check_form(form, fleet)
    assert problems == [] and candidate is not None and candidate.pools == {}
    assert "pools" not in candidate_body(form, fleet)
    assert text.startswith("# Candidate 'candidate'")


def test_an_example_candidate_comes_back_as_the_same_replay(fleet: Registry) -> None:
    original = load_candidate(REPO / "examples" / "candidates" / "shrink_h100.yaml", fleet)
    form = form_of(fleet, original)
    assert form.pools["h100-a"]["replicas"] == 8  # replicas_scale 0.5 of 16, shown as the count it means
    again, problems, _ = check_form(form, fleet)
    assert problems == [] and again is not None
    assert again.pools["h100-a"].replicas == 8 and again.pools["gaudi3-a"].hourly_cost_per_device == 2.6
    assert (again.policy, again.overflow, again.sla_tiers) == (original.policy, original.overflow, original.sla_tiers)


def _edit(form: CandidateForm, pool: str, **values: Any) -> CandidateForm:
    return dataclasses.replace(form, pools={**form.pools, pool: {**form.pools[pool], **values}})


@pytest.mark.parametrize(("change", "message"), [
    ({"mfu": 1.5}, "pools.h100-a.mfu: must be <= 1, got 1.5"),
    ({"mem_bw_eff": 0.0}, "pools.h100-a.mem_bw_eff: must be > 0, got 0.0"),
    ({"replicas": 0}, "pools.h100-a.replicas: must be >= 1, got 0"),
    ({"hourly_cost_per_device": -1.0}, "pools.h100-a.hourly_cost_per_device: must be > 0, got -1.0"),
    ({"step_overhead_ms": -2.0}, "pools.h100-a.step_overhead_ms: must be >= 0, got -2.0"),
    ({"max_num_batched_tokens": 16}, "pool h100-a: max_num_batched_tokens 16 is below max_concurrency 64"),
    ({"pp": 3}, "pool h100-a: 4 devices per replica do not split into 3 pipeline stages"),
])
def test_bad_values_get_the_loaders_message(fleet: Registry, change: dict[str, Any], message: str) -> None:
    candidate, problems, text = check_form(_edit(form_of(fleet), "h100-a", **change), fleet)
    assert candidate is None and any(message in p for p in problems), problems
    if "pools.h100-a" in message:  # the same words as the loader gives for that text as a file
        with pytest.raises(CandidateError) as exc:
            load_candidate_text(text, fleet, "candidate")
        assert [str(p) for p in exc.value.problems] == problems


def test_a_tier_without_limits_and_pd_split_without_pools_are_refused(fleet: Registry) -> None:
    form = dataclasses.replace(form_of(fleet), tiers={"standard": (None, None)}, policy="pd_split")
    _, problems, _ = check_form(form, fleet)
    assert any("sla_tiers.standard: expected ttft_s and/or e2e_s" in p for p in problems)
    assert any(p.startswith("candidate:") and "policy" in p for p in problems)


def test_the_written_file_runs_from_disk(fleet: Registry, tmp_path: Path) -> None:
    form = dataclasses.replace(_edit(form_of(fleet), "gaudi3-a", replicas=3, kv_cache_dtype="fp8"),
                               enabled={**form_of(fleet).enabled, "mlu370-a": False}, name="edited")
    path = tmp_path / "edited.yaml"
    path.write_text(candidate_yaml(form, fleet))
    cand = load_candidate(path, fleet)
    assert cand.name == "edited" and cand.pools["gaudi3-a"].replicas == 3
    assert cand.pools["gaudi3-a"].kv_cache_dtype == "fp8" and cand.pools["mlu370-a"].enabled is False


POOLS = [p.id for p in REGISTRY.pools if p.serving is not None]
values = st.fixed_dictionaries({
    "pool": st.sampled_from(POOLS), "replicas": st.integers(1, 64),
    "mfu": st.floats(0.01, 1.0), "mem_bw_eff": st.floats(0.01, 1.0), "step_overhead_ms": st.floats(0, 50),
    "hourly_cost_per_device": st.floats(0.01, 100), "gpu_memory_utilization": st.floats(0.5, 0.99),
    "kv_cache_dtype": st.sampled_from(["auto", "fp8", "bf16"]), "policy": st.sampled_from(
        ["sla_cost", "cost_min", "round_robin", "least_loaded"]), "overflow": st.sampled_from(["queue", "reject",
                                                                                              "degrade"]),
    "ttft": st.one_of(st.none(), st.floats(0.01, 100)), "e2e": st.floats(0.1, 1000)})


@settings(max_examples=60, deadline=None)
@given(values)
def test_form_to_yaml_to_form_is_the_same_form(v: dict[str, Any]) -> None:
    base = form_of(REGISTRY)
    form = dataclasses.replace(
        _edit(base, v["pool"], **{k: v[k] for k in ("replicas", "mfu", "mem_bw_eff", "step_overhead_ms",
                                                     "hourly_cost_per_device", "gpu_memory_utilization",
                                                     "kv_cache_dtype")}),
        policy=v["policy"], overflow=v["overflow"], tiers={"standard": (v["ttft"], v["e2e"])})
    candidate, problems, _ = check_form(form, REGISTRY)
    assert problems == [] and candidate is not None
    assert form_of(REGISTRY, candidate) == dataclasses.replace(form, name=candidate.name)


def test_pd_splits_encode_pools_go_into_the_file_and_come_back(fleet: Registry) -> None:
    form = dataclasses.replace(form_of(fleet), policy="pd_split", prefill=("h100-a",), decode=("ascend-a",),
                               encode=("h100-vl",))
    candidate, problems, text = check_form(form, fleet)
    assert problems == [] and candidate is not None
    assert candidate.policy_options["encode"] == ("h100-vl",) and "  encode: [h100-vl]\n" in text
    assert form_of(fleet, candidate).encode == ("h100-vl",)
    # without encode pools the file names none: images are encoded where they are prefilled
    plain = dataclasses.replace(form, encode=())
    assert "encode" not in check_form(plain, fleet)[2]
