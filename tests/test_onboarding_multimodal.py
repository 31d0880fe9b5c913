"""The multimodal bring-up item: its evidence file (modality, requests, errors, p50 TTFT) with file:line:column
errors, its gate, and the tracker counting it in inference bring-up (and the three-day bar) only for a pool whose
model declares `vision`."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest
import yaml

from onboarding.evidence import parse_multimodal
from onboarding.exceptions import EvidenceError
from onboarding.gates import FAIL, PASS, PENDING, multimodal
from pool_registry import Registry, load_registry_text
from replay.bench import closed_loop, default_requests
from replay.candidate import Candidate
from replay.fleet import pools_by_id
from store import Held, IngestRun, commit_run, connect, save_registry
from tests.cli import run
from tests.conftest import FLEET

GOOD = "modality,requests,errors,ttft_p50_ms\ntext,200,0,85.5\nimage,100,1,240\n"


def test_the_evidence_file_reads_each_modality() -> None:
    frame = parse_multimodal(GOOD, "mm.csv")
    assert frame.select("modality", "requests", "errors", "ttft_p50_ms").rows() == [
        ("text", 200, 0, 85.5), ("image", 100, 1, 240.0)]


@pytest.mark.parametrize(("body", "message"), [
    ("modality,requests,errors,ttft_p50_ms\nvideo,5,0,10\n", "mm.csv:2:1: column modality: expected one of text, "
                                                             "image, got 'video'"),
    ("modality,requests,errors,ttft_p50_ms\ntext,-5,0,10\n", "mm.csv:2:2: column requests: expected a whole number "
                                                             ">= 0, got '-5'"),
    ("modality,requests,errors,ttft_p50_ms\ntext,5,0.5,10\n", "mm.csv:2:3: column errors: expected a whole number "
                                                              ">= 0, got '0.5'"),
    ("modality,requests,errors,ttft_p50_ms\ntext,5,6,10\n", "mm.csv:2:3: column errors: 6 errors of 5 requests"),
    ("modality,requests,errors,ttft_p50_ms\ntext,5,0,-1\n", "mm.csv:2:4: column ttft_p50_ms: must be >= 0, got -1"),
    ("modality,requests,errors,ttft_p50_ms\ntext,5,0,1\ntext,5,0,1\n", "mm.csv:3:1: column modality: text appears "
                                                                       "twice"),
    ("modality,requests,errors\ntext,5,0\n", "mm.csv:1: missing column ttft_p50_ms"),
])
def test_a_bad_evidence_file_names_file_line_and_column(body: str, message: str) -> None:
    with pytest.raises(EvidenceError) as info:
        parse_multimodal(body, "mm.csv")
    assert str(info.value).startswith(message)


@pytest.mark.parametrize(("body", "status", "reason"), [
    (GOOD, PASS, "text: 200 requests, 0 errors, p50 TTFT 85.5 ms; image: 100 requests, 1 errors, p50 TTFT 240 ms"),
    ("modality,requests,errors,ttft_p50_ms\ntext,200,0,85\n", FAIL, "no image request served (no row)"),
    ("modality,requests,errors,ttft_p50_ms\ntext,200,0,85\nimage,3,3,0\n", FAIL,
     "no image request served (no request answered)"),
    ("modality,requests,errors,ttft_p50_ms\ntext,200,3,85\nimage,100,0,240\n", FAIL,
     "text requests failed 1.5% (line 2), above max_error_rate 0.01"),
])
def test_the_gate_wants_both_modalities_served_within_the_error_bound(body: str, status: str, reason: str) -> None:
    out = multimodal(parse_multimodal(body, "mm.csv"), 0.01)
    assert out.status == status and out.reason.startswith(reason)


T0 = int(dt.datetime(2026, 11, 25, tzinfo=dt.UTC).timestamp() * 1000)
GIB = 1024**3


def vlm_fleet() -> Registry:
    """The example fleet with one more pool serving Qwen2.5-VL on one H100, onboarding since 2026-11-24."""
    data: dict[str, Any] = yaml.safe_load(FLEET.read_text())
    data["pools"].append({
        "id": "vlm-a", "chip": "h100-sxm", "devices": 1, "devices_per_node": 1, "hourly_cost_per_device": 3.2,
        "exporter": "dcgm", "assign": {"node_pattern": "vlm-a-*"},
        "serving": {"model": "qwen2.5-vl-7b", "replicas": 1, "devices_per_replica": 1, "max_concurrency": 16},
        "cost_model": {"mfu": 0.4, "mem_bw_eff": 0.7},
        "onboarding": {"stage": "framework", "started": "2026-11-24",
                       "checks": {"devices": {"by": "a.b", "at": "2026-11-24"}}}})
    return load_registry_text(yaml.safe_dump(data), str(FLEET))


@pytest.fixture
def vlm_db(db_path: Path) -> Path:
    con = connect(db_path)
    save_registry(con, vlm_fleet(), str(FLEET))
    samples = [(T0 + k * 300_000, "vlm-a", "vlm-a-01", "0", metric, value, "{}", True) for k in range(24)
               for metric, value in (("accelerator.utilization", 0.5), ("accelerator.memory.used", 20.0 * GIB),
                                     ("accelerator.memory.total", 80.0 * GIB), ("accelerator.power", 300.0),
                                     ("accelerator.temperature", 55.0))]
    raw = pl.DataFrame(samples, schema=["ts", "pool", "node", "device", "metric", "value", "attributes",
                                        "device_wide"], orient="row")
    ingest = IngestRun("file", "hand-built")
    ingest.add_read(raw.height)
    ingest.add_samples(raw)
    commit_run(Held(con), ingest)
    con.close()
    return db_path


def test_a_vision_pool_reaches_bring_up_only_with_its_image_pipeline_proven(
        vlm_db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = ["--db", str(vlm_db)]
    ops = tmp_path / "ops.csv"
    ops.write_text("op,max_abs_err,tol\nmatmul,0.004,0.01\n")
    assert run(capsys, *db, "onboarding", "add-evidence", "vlm-a", "operators", str(ops), "--at", "2026-11-25")[0] == 0
    spec = pools_by_id(vlm_fleet(), Candidate(name="t"))["vlm-a"]
    p = closed_loop(spec, 4, 512, 64, default_requests(4))
    bench = tmp_path / "bench.csv"
    bench.write_text(f"pool,isl,osl,concurrency,ttft_ms,tpot_ms\nvlm-a,512,64,4,{p.ttft_ms_p50:.3f},"
                     f"{p.tpot_ms_p50:.3f}\n")
    code, out, _ = run(capsys, *db, "onboarding", "add-evidence", "vlm-a", "benchmark", str(bench), "--at",
                       "2026-11-25")
    assert code == 0, out
    code, out, _ = run(capsys, *db, "--json", "onboarding", "vlm-a")
    got = json.loads(out)[0]
    items = {i["id"]: i for i in got["items"]}
    assert items["operators"]["status"] == PASS and items["benchmark"]["status"] == PASS
    assert items["multimodal"]["status"] == PENDING and items["multimodal"]["stage"] == "inference_bringup"
    assert got["stage"] == "inference_bringup"  # the text pipeline alone does not bring a vision model up
    mm = tmp_path / "mm.csv"
    mm.write_text(GOOD)
    code, out, _ = run(capsys, *db, "onboarding", "add-evidence", "vlm-a", "multimodal", str(mm), "--at",
                       "2026-11-28")
    assert code == 0, out
    code, out, _ = run(capsys, *db, "--json", "onboarding", "vlm-a")
    got = json.loads(out)[0]
    assert got["stage"] == "multi_pool_inference"
    assert got["bringup"] == {"days": 4.0, "bar_days": 3.0, "met": False}  # proven on day 4: over the bar
    # a text-only pool's checklist has no such item
    code, out, _ = run(capsys, *db, "--json", "onboarding", "mlu370-a")
    assert "multimodal" not in {i["id"] for i in json.loads(out)[0]["items"]}
    bad = tmp_path / "bad.csv"
    bad.write_text("modality,requests,errors,ttft_p50_ms\nimage,2,3,10\n")
    code, _, err = run(capsys, *db, "onboarding", "add-evidence", "vlm-a", "multimodal", str(bad))
    assert code == 2 and f"{bad}:2:3: column errors: 3 errors of 2 requests" in err
