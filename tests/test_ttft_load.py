"""TTFT under load: the engine's time per prompt chunk in a step (admitting a request, preparing its prefill's
inputs), which a pass pays once for every prompt it carries, so a wave of c prompts prefilled together takes c of
them; its place in the one step model, in the registry and candidates, and in calibration."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from pool_registry import load_registry_text, registry_from_json, registry_to_json
from replay import Candidate, CandidateError, calibrate, closed_loop, load_candidate_text, parse_bench_table
from replay.calibrate.evidence import Bench
from replay.costmodel import step_model
from replay.fleet import pools_by_id
from tests.replay_fleets import flat_model, fleet, pool
from tests.test_loader import _swap


def spec(chunk_us: float = 0.0, concurrency: int = 8):  # type: ignore[no-untyped-def]
    reg = fleet(pool("p", concurrency=concurrency), models=(flat_model(),))
    return dataclasses.replace(pools_by_id(reg, Candidate(name="t"))["p"], chunk_overhead_us=chunk_us)


def test_a_pass_pays_the_engine_time_of_each_prompt_chunk_it_carries() -> None:
    plain, chunked = step_model(spec()), step_model(spec(1000.0))
    # 3 decoders and 2 prompt chunks: 2 x 1 ms more; a pass of decoders alone pays none
    assert chunked.pass_seconds(5, 3 + 64, 0.0, 3) - plain.pass_seconds(5, 3 + 64, 0.0, 3) == pytest.approx(2e-3)
    assert chunked.pass_seconds(5, 5, 0.0, 5) == plain.pass_seconds(5, 5, 0.0, 5)


def test_a_wave_of_prompts_waits_for_each_others_admission() -> None:
    # flat model: a memory-bound pass is 10 ms (1e10 params x 2 B at 2e12 B/s); 8 prompts of 16 tokens compute in
    # 8 x 16 x 4e-5 = 5.1 ms, hidden under it. Lockstep clients with fixed lengths prefill as one wave each time,
    # so every TTFT is one pass plus 8 x 1 ms; a lone client's is one pass plus 1 ms.
    for c, want_ms in ((1, 10.0 + 1.0), (8, 10.0 + 8.0)):
        got = closed_loop(spec(1000.0, concurrency=8), c, 16, 8, 4 * c, arrivals="lockstep")
        assert got.ttft_ms_p50 == pytest.approx(want_ms, rel=1e-3)
        assert got.ttft_ms_p99 == pytest.approx(want_ms, rel=1e-3)
    # without the term the wave's TTFT does not grow with concurrency at all
    assert closed_loop(spec(), 8, 16, 8, 32, arrivals="lockstep").ttft_ms_p50 == pytest.approx(10.0, rel=1e-3)


def test_the_field_loads_round_trips_and_a_candidate_overrides_it() -> None:
    reg = load_registry_text(_swap("max_concurrency: 32}", "max_concurrency: 32, chunk_overhead_us: 350}"))
    assert reg.pool("p1").serving.chunk_overhead_us == 350  # type: ignore[union-attr]
    assert registry_from_json(registry_to_json(reg)) == reg
    cand = load_candidate_text("name: c\npolicy: round_robin\npools: {p1: {chunk_overhead_us: 120}}\n", reg, "c")
    assert pools_by_id(reg, cand)["p1"].chunk_overhead_us == 120
    with pytest.raises(CandidateError, match="chunk_overhead_us"):
        load_candidate_text("name: c\npolicy: round_robin\npools: {p1: {chunk_overhead_us: -1}}\n", reg, "c")


@pytest.mark.slow
def test_calibration_finds_a_planted_time_per_prompt_chunk_from_lockstep_rows() -> None:
    reg = fleet(pool("p", concurrency=64, mfu=0.4, eff=0.6), models=(flat_model(params_b=8.0),))
    planted = dataclasses.replace(pools_by_id(reg, Candidate(name="t"))["p"], step_overhead_ms=3.0,
                                  chunk_overhead_us=1500.0)
    lines = ["pool,isl,osl,concurrency,ttft_ms,tpot_ms,arrivals"]
    for isl in (256, 2048):
        for c in (1, 4, 16, 32):
            p = closed_loop(planted, c, isl, 64, max(32, 4 * c), arrivals="lockstep")
            lines.append(f"p,{isl},64,{c},{p.ttft_ms_p50!r},{p.tpot_ms_p50!r},lockstep")
    (f,), _ = calibrate(None, reg, bench=parse_bench_table("\n".join(lines) + "\n"))
    assert f.chunk_overhead_us == pytest.approx(1500.0, rel=0.02)
    assert f.step_overhead_ms == pytest.approx(3.0, rel=0.05) and f.mfu == pytest.approx(0.4, rel=0.02)
    assert f.explains is True and "chunk_overhead_us" in f.values()


@pytest.mark.slow
def test_rows_replayed_as_their_client_ran_give_back_the_planted_coefficients() -> None:
    """Rows measured as InferenceMAX's client runs (every client starting at once, lengths drawn up to 0.8 of
    them, 10 requests a client) say so in their columns, and calibration replays them so: every planted
    coefficient comes back. The same figures without the columns are replayed spread out at the full lengths,
    where no prompt meets another: the fit drops the time per prompt chunk and takes 12 % off the prefill's mfu,
    and says it cannot explain its rows (TTFT 12 %, TPOT 16 % in-sample)."""
    reg = fleet(pool("p", concurrency=64, mfu=0.4, eff=0.6), models=(flat_model(params_b=8.0),))
    planted = dataclasses.replace(pools_by_id(reg, Candidate(name="t"))["p"], step_overhead_ms=3.0,
                                  chunk_overhead_us=1500.0)
    told = ["pool,isl,osl,concurrency,ttft_ms,tpot_ms,arrivals,range_ratio,range_style,num_prompts"]
    bare = ["pool,isl,osl,concurrency,ttft_ms,tpot_ms"]
    for isl in (256, 2048):
        for c in (1, 4, 16, 32):
            p = closed_loop(planted, c, isl, 64, 10 * c, arrivals="lockstep", range_ratio=0.8, range_style="up_to")
            told.append(f"p,{isl},64,{c},{p.ttft_ms_p50!r},{p.tpot_ms_p50!r},lockstep,0.8,up_to,{10 * c}")
            bare.append(f"p,{isl},64,{c},{p.ttft_ms_p50!r},{p.tpot_ms_p50!r}")
    (f,), _ = calibrate(None, reg, bench=parse_bench_table("\n".join(told) + "\n"))
    assert (f.mfu, f.mem_bw_eff, f.step_overhead_ms, f.chunk_overhead_us) == pytest.approx((0.4, 0.6, 3.0, 1500.0),
                                                                                          rel=1e-3)
    assert f.checks[1].replayed == "lockstep; lengths drawn up to them, ratio 0.8; 40 prompts; medians"
    (g,), _ = calibrate(None, reg, bench=parse_bench_table("\n".join(bare) + "\n"))
    assert g.chunk_overhead_us == 0.0 and g.mfu is not None and g.mfu < 0.37
    assert g.explains is False


@pytest.mark.slow
def test_rows_of_means_are_compared_with_means() -> None:
    """The same client reports a mean TTFT as well as a median, and the mean holds the first wave: 10 c prompts
    sent at once, queued behind each other's chunks. Rows of means that say so give back every planted
    coefficient; read as medians, the fit puts the first wave into the time per prompt chunk."""
    reg = fleet(pool("p", concurrency=64, mfu=0.4, eff=0.6), models=(flat_model(params_b=8.0),))
    planted = dataclasses.replace(pools_by_id(reg, Candidate(name="t"))["p"], step_overhead_ms=3.0,
                                  chunk_overhead_us=1500.0)
    told = ["pool,isl,osl,concurrency,ttft_ms,tpot_ms,arrivals,range_ratio,range_style,num_prompts,statistic"]
    bare = [told[0].removesuffix(",statistic")]
    growth = []
    for isl in (256, 2048):
        for c in (1, 4, 16, 32):
            p = closed_loop(planted, c, isl, 64, 10 * c, arrivals="lockstep", range_ratio=0.8, range_style="up_to")
            row = f"p,{isl},64,{c},{p.ttft_ms_mean!r},{p.tpot_ms_mean!r},lockstep,0.8,up_to,{10 * c}"
            told.append(row + ",mean")
            bare.append(row)
            growth.append(p.ttft_ms_mean / p.ttft_ms_p50)
    assert max(growth) > 1.5  # the first wave is in the mean, not the median
    (f,), _ = calibrate(None, reg, bench=parse_bench_table("\n".join(told) + "\n"))
    assert (f.mfu, f.mem_bw_eff, f.step_overhead_ms, f.chunk_overhead_us) == pytest.approx((0.4, 0.6, 3.0, 1500.0),
                                                                                          rel=1e-3)
    assert f.checks[1].replayed == "lockstep; lengths drawn up to them, ratio 0.8; 40 prompts; means"
    (g,), _ = calibrate(None, reg, bench=parse_bench_table("\n".join(bare) + "\n"))
    # mfu 0.31, the bandwidth at its bound of 1, 5.3 ms a step and no time per chunk, and it still explains its
    # rows (TTFT 20 %, TPOT 8 % in-sample): nothing but the column tells this fit from the right one
    assert g.mfu is not None and g.mfu < 0.33 and g.step_overhead_ms > 4.5 and g.chunk_overhead_us == 0.0
    assert g.explains is True


def test_a_row_says_how_its_client_is_replayed() -> None:
    head = "pool,isl,osl,concurrency,ttft_ms,tpot_ms,arrivals,range_ratio,range_style,num_prompts\n"
    bench = Bench(parse_bench_table(head + "p,256,64,4,10,2,lockstep,0.8,up_to,40\n"
                                           "p,256,64,16,10,2,,0.1,,\n"
                                           "p,256,64,16,10,2,lockstep,1,up_to,\n"))
    labels = bench.compared(np.ones(3), np.ones(3))["TTFT"][2]
    assert labels == ["ISL 256, OSL 64 (drawn up to them, ratio 0.8) at concurrency 4",
                      "ISL 256, OSL 64 (drawn around them, ratio 0.1) at concurrency 16",
                      "ISL 256, OSL 64 at concurrency 16"]  # SGLang's ratio 1: fixed lengths
    assert [bench.replayed(k) for k in range(3)] == [
        "lockstep; lengths drawn up to them, ratio 0.8; 40 prompts; medians",
        "staggered; lengths drawn around them, ratio 0.1; 64 prompts; medians",  # calibration's own 4 a client
        "lockstep; 64 prompts; medians"]
