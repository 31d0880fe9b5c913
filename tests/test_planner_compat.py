"""One compatibility verdict: replay.planner.compat judged by hand on a table of model x pool cases, and
`hetpool versions`, `hetpool plan` and the Versions page agreeing on every cell of a registry built to hold each
kind of verdict."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from streamlit.testing.v1 import AppTest

from app.console.tables import plain
from pool_registry import Registry, load_registry
from pool_registry.compat import FAIL, FRAMEWORK_INCOMPATIBLE, HW_INCOMPATIBLE, PASS
from replay.planner.compat import check, compatibility
from store import ENV_DB
from tests.cli import run
from tests.conftest import FLEET, REPO

GB = 1e9
LLAMA = "llama-3.1-70b"


def with_pool(reg: Registry, pool: str, **changes: Any) -> Registry:
    """The registry with one pool's fields (or its serving block's, under `serving`) replaced."""
    p = reg.pool(pool)
    serving = changes.pop("serving", None)
    if serving is not None:
        assert p.serving is not None
        changes["serving"] = dataclasses.replace(p.serving, **serving)
    return dataclasses.replace(reg, pools=tuple(dataclasses.replace(q, **changes) if q is p else q
                                                for q in reg.pools))


def llama_bytes_per_device(tp: int, pp: int) -> float:
    """Llama 3.1 70B's weights, one 131,072-token sequence's KV and vLLM's working memory on one device, by hand:
    141.2 GB of weights over tp x pp; 2 x 80 layers x 8 KV heads x 128 x 2 B per token, the KV heads split over tp
    and the layers over pp; 1 GB of runtime and a step of 8192 tokens of 8192-wide activations at 2 B, the residual
    stream twice and the MLP's 7 widths split over tp."""
    weights = 70.6e9 * 2 / (tp * pp)
    kv = 131_072 * 2 * (80 / pp) * (8 / tp) * 128 * 2
    working = 1e9 + 8192 * 8192 * 2 * (2 + 7 / tp)
    return weights + kv + working


def test_a_model_two_nodes_hold_passes_on_pipeline_stages(fleet: Registry) -> None:
    # mlu370 as the demo has it: 8 devices of 48 GB, 2 per node. One node (96 GB) cannot hold 141 GB of weights,
    # which is all the old verdict asked; 4 pipeline stages over the 4 nodes can
    reg = with_pool(fleet, "mlu370-a", devices=8, devices_per_node=2)
    usable = 48 * GB * 0.9
    assert llama_bytes_per_device(2, 2) > usable > llama_bytes_per_device(2, 4)
    got = check(reg, reg.pool("mlu370-a"), reg.model(LLAMA))
    assert (got.status, got.layout, got.reasons) == (PASS, "tp2 pp4 (8 devices)", ())


def test_a_model_no_layout_holds_is_hw_incompatible_with_the_closest_layout_by_hand(fleet: Registry) -> None:
    reg = with_pool(fleet, "mlu370-a", devices=4, devices_per_node=2)
    got = check(reg, reg.pool("mlu370-a"), reg.model(LLAMA))
    need = llama_bytes_per_device(2, 2) / GB
    assert got.status == HW_INCOMPATIBLE and got.layout == ""
    assert got.reasons[0].startswith(f"no layout of the pool holds it: the closest, tp2 pp2, needs {need:.1f} GB per "
                                     "device (weights 35.3, KV cache of one 131,072-token sequence 10.7, working "
                                     "memory 1.7) of 43.2 GB usable; it needs at least 5 devices, the pool has 4")


def test_the_served_model_on_a_replica_too_small_fails_while_another_layout_holds_it(fleet: Registry) -> None:
    reg = with_pool(fleet, "h100-a", serving={"devices_per_replica": 2})
    assert llama_bytes_per_device(2, 1) > 80 * GB * 0.9 > llama_bytes_per_device(4, 1)
    got = check(reg, reg.pool("h100-a"), reg.model(LLAMA))
    assert got.status == FAIL and got.serves and got.layout == "tp4 pp1 (4 devices)"
    assert got.reasons[0].startswith("the configured replica (tp2 pp1) needs ")
    assert got.reasons[0].endswith("; tp4 pp1 (4 devices) holds it (hetpool plan --model llama-3.1-70b --pool h100-a "
                                   "--write FILE)")


def test_layouts_the_divisibility_rules_exclude_do_not_hold_a_model(fleet: Registry) -> None:
    # Qwen3-235B on 8 H100s, 2 per node: 4 nodes would hold its 470 GB, but 94 layers split into 1 or 2 stages only
    reg = with_pool(fleet, "h100-a", devices=8, devices_per_node=2)
    got = check(reg, reg.pool("h100-a"), reg.model("qwen3-235b-a22b"))
    assert got.status == HW_INCOMPATIBLE
    assert "it needs at least 8 devices, the pool has 8, but no layout of that many splits the model (tp2 pp4: 94 " \
           "layers do not split into 4 pipeline stages)" in got.reasons[0]
    assert got.reasons[1].startswith("requires sglang >=0.5,<0.6")  # the engine is said too


def test_a_format_the_chip_lacks_and_a_runtime_requirement(fleet: Registry) -> None:
    fp8 = dataclasses.replace(fleet.model(LLAMA), id="llama-fp8", dtype="fp8", bytes_per_param=1.0)
    reg = dataclasses.replace(fleet, models=(*fleet.models, fp8))
    assert check(reg, reg.pool("h100-a"), fp8).status == PASS
    got = check(reg, reg.pool("ascend-a"), fp8)
    assert (got.status, got.reasons) == (HW_INCOMPATIBLE, (
        "dtype fp8 is not supported by ascend-910b (supports fp32, bf16, fp16, int8)",))
    cuda = dataclasses.replace(fleet.model(LLAMA), requires={"vllm": ">=0.15,<0.16", "cuda": ">=12.6"})
    got = check(fleet, fleet.pool("h100-a"), cuda)
    assert (got.status, got.reasons) == (FAIL, ("requires cuda >=12.6; the pool has 12.4",))


# The registry of the agreement test: the example fleet with a cell of each kind.
CASES = {
    (LLAMA, "h100-a"): FAIL,                       # served on a replica of 2 H100s, too small; 4 hold it
    (LLAMA, "mi300x-a"): FRAMEWORK_INCOMPATIBLE,   # no vllm there
    (LLAMA, "mlu370-a"): PASS,                     # 8 of 48 GB over 4 nodes, pipelined
    ("llama-fp8", "ascend-a"): HW_INCOMPATIBLE,    # no fp8 on the chip
    ("llama-fp8", "h100-a"): PASS,
    ("qwen3-235b-a22b", "mlu370-a"): HW_INCOMPATIBLE,  # 8 x 48 GB cannot hold 470 GB of weights
    ("qwen3-235b-a22b", "mi300x-a"): PASS,
}


def agreement_registry(tmp_path: Path) -> Path:
    """The example fleet's file with the cases above, written where its evidence files need not be read."""
    data = yaml.safe_load(FLEET.read_text(encoding="utf-8"))
    llama = next(m for m in data["models"] if m["id"] == LLAMA)
    data["models"].append({**llama, "id": "llama-fp8", "dtype": "fp8", "bytes_per_param": 1})
    for pool in data["pools"]:
        pool["onboarding"].pop("checks", None)
        if pool["id"] == "h100-a":
            pool["serving"]["devices_per_replica"] = 2
        if pool["id"] == "mlu370-a":
            pool.update(devices=8, devices_per_node=2)
            pool["serving"]["replicas"] = 2
    path = tmp_path / "cases.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def test_versions_plan_and_the_versions_page_give_one_verdict(demo_db: Path, tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str],
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "cases.duckdb"
    shutil.copy(demo_db, db)  # samples, so the page opens on a window
    registry = agreement_registry(tmp_path)
    assert run(capsys, "--db", str(db), "registry", "load", str(registry))[0] == 0
    cells = compatibility(load_registry(registry))
    expected = {(c.model, c.pool): c.status for c in cells}
    served = {(c.model, c.pool) for c in cells if c.serves}
    assert {k: expected[k] for k in CASES} == CASES  # the hand table holds

    code, out, _ = run(capsys, "--db", str(db), "--json", "versions")
    assert code == 1  # the served model on h100-a fails
    versions = {(c["model"], c["pool"]): c["status"] for c in json.loads(out)["compatibility"]}

    planned = {}
    for model in {m for m, _ in expected}:
        code, out, err = run(capsys, "--db", str(db), "--json", "plan", "--model", model, "--concurrency", "1")
        assert code in (0, 1), err
        planned.update({(c["model"], c["pool"]): c["status"] for c in json.loads(out)["compatibility"]})
        code, text, _ = run(capsys, "--db", str(db), "plan", "--model", model, "--concurrency", "1")
        for pool in {p for m, p in expected if m == model}:
            assert f"\n  {pool}{' (served)' if (model, pool) in served else ''}: {expected[model, pool]}" in text

    monkeypatch.setenv(ENV_DB, str(db))
    at = AppTest.from_file(str(REPO / "app" / "console" / "main.py"), default_timeout=60).run()
    at = at.switch_page("screens/versions.py").run()
    assert not at.exception
    grid = next(t.value for t in at.table if "model" in t.value.columns).map(plain).set_index("model")
    page = {(m, p): str(grid.loc[m, p]).rstrip("*") for m in grid.index for p in grid.columns}

    assert versions == planned == page == expected
