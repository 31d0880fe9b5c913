"""`hetpool plan`: the table and JSON, the stored registry or a file, exit codes, and bad input in one line."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from replay.planner import PLAN_KEYS
from tests.cli import run
from tests.conftest import FLEET
from tests.planner_fleets import MOE_3T, fleet_data

FILE = ("--registry", str(FLEET))


def test_json_has_exactly_the_issues_keys(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--json", "plan", *FILE, "--model", "qwen3-235b-a22b", "--pool", "mi300x-a",
                       "--concurrency", "16")
    data = json.loads(out)
    assert code == 0 and set(data) == {"model", "plans", "excluded", "min_devices", "compatibility", "notes"}
    # (470 GB of weights + 1,152 x 16 x 2 x 94 x 4 x 128 x 2 B of KV) / (192 x 0.9 - 1 GB) = 2.76 devices
    assert data["model"] == "qwen3-235b-a22b" and data["min_devices"] == {"mi300x-a": 3}
    assert PLAN_KEYS == ("pool", "tp", "pp", "ep", "attention_dp", "replicas", "devices_per_replica",
                         "weights_gb_per_device", "kv_tokens_per_replica", "fits", "concurrency", "ttft_ms_p50",
                         "tpot_ms_p50",
                         "output_tok_s_per_device", "usd_per_mtok", "meets_targets", "ttft_ms_p50_band",
                         "tpot_ms_p50_band", "meets_in_band_only", "encode_ms_per_image")
    assert all(set(p) == set(PLAN_KEYS) for p in data["plans"])
    assert {(p["tp"], p["ep"]) for p in data["plans"]} >= {(8, 8), (8, 1), (4, 4)}  # a MoE gets expert parallelism
    # 94 layers: no 4-stage pipeline; 4 KV heads replicate over tp 8
    assert {(e["rule"], e["pp"]) for e in data["excluded"]} >= {("layers", 4)}
    assert all(e["rule"] == "layers" for e in data["excluded"])
    best = data["plans"][0]
    assert best["fits"] and best["meets_targets"] and best["ttft_ms_p50"] > 0


def test_the_table_on_the_stored_registry(capsys: pytest.CaptureFixture[str], fleet_db: Path) -> None:
    code, out, _ = run(capsys, "--db", str(fleet_db), "plan", "--model", "llama-3.1-70b", "--pool", "h100-a",
                       "--pool", "gaudi3-a", "--concurrency", "16,64", "--top", "3")
    lines = out.splitlines()
    assert code == 0 and lines[0].startswith("plan llama-3.1-70b: isl 1024, osl 128, KV for 1,152 tokens")
    assert lines[1].split()[:3] == ["pool", "layout", "repl"]
    assert len([ln for ln in lines[2:5] if ln.split()[0] in ("h100-a", "gaudi3-a")]) == 3
    assert "... and" in lines[5] and "more fitting plans" in lines[5]
    assert "excluded layouts:" in out and "layers: 80 layers do not split into 32 pipeline stages" in out


def test_impossible_targets_exit_1_and_say_which_fails(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "plan", *FILE, "--model", "llama-3.1-70b", "--pool", "gaudi3-a", "--tpot-ms", "0.1",
                       "--ttft-ms", "1")
    assert code == 1
    missed = [ln for ln in out.splitlines() if ln.startswith("targets missed: ")]
    assert len(missed) == 2
    assert missed[0].startswith("targets missed: TTFT p50 <= 1 ms fails: the fastest layout (gaudi3-a ")
    assert missed[1].startswith("targets missed: TPOT p50 <= 0.1 ms fails: the fastest layout (gaudi3-a ")
    assert all(re.search(r"\) reaches [\d.]+ ms, [\d.]+ ms \([\d,]+%\) over$", m) for m in missed)


def test_a_memory_wall_exits_1(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    data = fleet_data()
    data["models"].append(MOE_3T)
    path = tmp_path / "fleet.yaml"
    path.write_text(yaml.safe_dump(data))
    code, out, _ = run(capsys, "plan", "--registry", str(path), "--model", "moe-3t", "--pool", "h100-a")
    # the hand computation is in tests/test_planner_memory.py
    assert code == 1 and "memory wall on h100-a: nothing fits; the model needs at least 86 devices; the pool has " \
        "64" in out
    assert "no layout fits memory on any pool planned" in out


@pytest.mark.parametrize(("argv", "message"), [
    (["--model", "nope"], "hetpool: error: unknown model 'nope'; known: llama-3.1-70b, qwen3-235b-a22b, "
                          "qwen3-30b-a3b, qwen2.5-vl-7b"),
    (["--model", "llama-3.1-70b", "--pool", "h100-a", "--pool", "tpu-z"],
     "hetpool: error: unknown pool 'tpu-z'; known: h100-a, mi300x-a, ascend-a, gaudi3-a, mlu370-a, "
         "h100-vl"),
    (["--model", "llama-3.1-70b", "--context", "100"],
     "hetpool: error: context 100 is shorter than a request's isl + osl = 1152 tokens"),
    (["--model", "qwen3-30b-a3b", "--context", "65536"],
     "hetpool: error: context 65536 exceeds qwen3-30b-a3b's max_context of 32768"),
    (["--model", "llama-3.1-70b", "--ttft-ms", "-3"], "hetpool: error: a TTFT target must be > 0 ms; got -3.0"),
    (["--model", "llama-3.1-70b", "--pool", "gaudi3-a", "--tpot-ms", "0.1", "--write", "x.yaml"],
     "hetpool: error: nothing to write to x.yaml: no layout fits and meets the targets"),
])
def test_bad_input_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str], argv: list[str], message: str,
                                          tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    code, out, err = run(capsys, "plan", *FILE, *argv)
    assert code == 2 and err == message + "\n" and out == ""
    assert not (tmp_path / "x.yaml").exists()


def test_no_stored_registry_says_how_to_load_one(capsys: pytest.CaptureFixture[str], db_path: Path) -> None:
    assert run(capsys, "--db", str(db_path), "init")[0] == 0
    code, _, err = run(capsys, "--db", str(db_path), "plan", "--model", "llama-3.1-70b")
    assert code == 2 and err.count("\n") == 1 and "hetpool registry load examples/fleet.yaml" in err
