"""The closed-loop benchmark and KV admission: what `replay bench` and a pool's KV cache do at concurrency."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from app.cli import main
from pool_registry import Registry
from replay import Candidate, closed_loop, run_replay
from replay.errors import ReplayError
from replay.fleet import resolve_pools
from tests.replay_fleets import pool

LLAMA_FP8 = "llama-3.1-70b"


def h100_pool(fleet: Registry, dpr: int) -> Registry:
    """One replica of `dpr` H100s serving llama 70B with fp8 weights, max_concurrency 64."""
    import dataclasses
    llama = dataclasses.replace(fleet.model(LLAMA_FP8), bytes_per_param=1.0)
    return Registry("t", (fleet.chip("h100-sxm"),), (llama,), (
        pool("p", chip_id="h100-sxm", model_id=LLAMA_FP8, dpr=dpr, concurrency=64, mfu=0.45, eff=0.75),))


def most_running(rows: pl.DataFrame) -> int:
    """The most requests admitted and unfinished at one moment."""
    start = (rows["arrival_ms"] / 1000 + rows["wait_s"]).to_numpy()
    end = (rows["arrival_ms"] / 1000 + rows["e2e_s"]).to_numpy()
    times = np.concatenate([start, end])
    steps = np.concatenate([np.ones_like(start), -np.ones_like(end)])
    order = np.lexsort((steps, times))  # ends before starts at the same instant
    return int(np.cumsum(steps[order]).max())


@pytest.mark.parametrize(("dpr", "most"), [(2, 27), (8, 64)])
def test_a_70b_fp8_model_queues_8k_prompts_for_kv_on_2_devices_not_on_8(fleet: Registry, dpr: int,
                                                                       most: int) -> None:
    # 2 x 80 GB x 0.9 = 144 GB, less 70.6 GB of fp8 weights, holds 223,999 tokens of KV (327,680 B each):
    # admission reserves each 8192-token prompt, so 27 run at once and the rest queue for KV. 8 devices hold
    # 1.54M tokens: all 64 run at once.
    reg = h100_pool(fleet, dpr)
    spec = resolve_pools(reg, Candidate(name="t"))[0]
    assert spec.kv_capacity_tokens == int((dpr * 80e9 * 0.9 - 70.6e9) // 327_680)
    traffic = pl.DataFrame({"arrival_ms": [0] * 64, "in_tokens": 8192, "out_tokens": 256})
    result = run_replay(Candidate(name="c", policy="cost_min"), traffic, reg, 0)
    assert most_running(result.requests) == most
    assert result.summary.served == 64
    if dpr == 2:  # the running prompts' decoding outgrows the cache: the newest are preempted and recomputed
        assert result.summary.preempted > 0 and result.summary.kv_use["p"] > 0.5
    else:
        assert result.summary.preempted == 0


def test_tpot_grows_with_concurrency_and_throughput_with_it(fleet: Registry) -> None:
    spec = resolve_pools(h100_pool(fleet, 8), Candidate(name="t"))[0]
    points = [closed_loop(spec, c, 1024, 128, 200) for c in (1, 8, 32, 64)]
    tpot = [p.tpot_ms_p50 for p in points]
    assert all(t is not None for t in tpot)
    assert tpot == sorted(tpot) and tpot[-1] > 1.5 * tpot[0]  # type: ignore[operator]
    assert [p.output_tok_s for p in points] == sorted(p.output_tok_s for p in points)
    # one client alone: prefill is one compute-bound pass, each token one memory-bound pass
    alone = points[0]
    assert alone.ttft_ms_p50 == pytest.approx(1024 * 2 * 70.6e9 / (989e12 * 0.45 * 8) * 1000, rel=1e-6)
    assert alone.req_s == pytest.approx(1000 / (alone.ttft_ms_p50 + 127 * alone.tpot_ms_p50), rel=1e-6)


def test_a_request_larger_than_the_cache_is_refused(fleet: Registry) -> None:
    spec = resolve_pools(h100_pool(fleet, 2), Candidate(name="t"))[0]
    with pytest.raises(ReplayError, match="does not fit the replica's KV cache of 223999 tokens"):
        closed_loop(spec, 1, 300_000, 10, 5)


def test_the_bench_command_prints_and_emits_json(capsys: pytest.CaptureFixture[str], fleet_db: Path) -> None:
    code = main(["--db", str(fleet_db), "--json", "replay", "bench", "--pool", "h100-a", "--concurrency", "1,16",
                 "--isl", "512", "--osl", "64", "--requests", "50"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and [p["concurrency"] for p in out] == [1, 16]
    assert set(out[0]) == {"concurrency", "ttft_ms_p50", "ttft_ms_p99", "tpot_ms_p50", "tpot_ms_p99",
                           "output_tok_s", "req_s"}
    assert out[1]["tpot_ms_p50"] > out[0]["tpot_ms_p50"]
    assert main(["--db", str(fleet_db), "replay", "bench", "--pool", "h100-a", "--concurrency", "4",
                 "--isl", "512", "--osl", "64"]) == 0
    text = capsys.readouterr().out
    assert "concurrency" in text and "output tok/s" in text
    assert main(["--db", str(fleet_db), "replay", "bench", "--pool", "nope", "--concurrency", "4",
                 "--isl", "512", "--osl", "64"]) == 2
    assert "unknown pool 'nope'; replayable: h100-a" in capsys.readouterr().err
