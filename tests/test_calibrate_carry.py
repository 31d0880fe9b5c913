"""How far a fit carried from one TP degree to another is to be trusted: the time per sequence as engine time or
as work the TP degree spreads, computed by hand."""

from __future__ import annotations

import re

import pytest

from replay import Candidate
from replay.calibrate import BenchCheck, PoolFit, carried, sequence_time_as_work
from replay.costmodel import step_model
from replay.fitting import apply
from replay.fleet import PoolSpec, pools_by_id
from tests.test_calibrate import tp_fleet

FITTED = {"mfu": 0.45, "mem_bw_eff": 0.7, "step_overhead_ms": 3.0, "seq_overhead_us": 200.0, "collective_us": 2.0}
BAND = re.compile(r"if its (\d+) us per running sequence is work that TP spreads, a decode pass of (\d+) sequences "
                  r"of (\d+) tokens takes ([\d.]+) ms at TP(\d) rather than ([\d.]+) ms \(([+-]\d+) %\), and TPOT at "
                  r"that batch lies between the two")


@pytest.fixture(scope="module")
def specs() -> dict[str, PoolSpec]:
    return pools_by_id(tp_fleet(concurrency=256), Candidate(name="x"))


@pytest.mark.parametrize(("pool", "from_tp", "change_ms"), [
    ("tp8", 4, -6.4),    # 64 x 200 us x (4/8 - 1): half of the per-sequence time goes
    ("tp2", 4, +12.8),   # 64 x 200 us x (4/2 - 1): on half the devices the same work takes twice as long
    ("tp4", 4, 0.0),     # the degree it was fitted on
])
def test_the_time_per_sequence_as_work_scales_with_the_tp_ratio(specs: dict[str, PoolSpec], pool: str,
                                                                from_tp: int, change_ms: float) -> None:
    spec = apply(specs[pool], FITTED)
    as_engine, as_work = sequence_time_as_work(spec, from_tp, 64, 2112)
    assert as_engine == pytest.approx(step_model(spec).pass_seconds(64, 64, 64 * 2112, 64, 64 * 2112))
    assert (as_work - as_engine) * 1e3 == pytest.approx(change_ms, abs=1e-9)


def source(seq_us: float, checks: tuple[BenchCheck, ...]) -> PoolFit:
    """A TP4 fit as calibration reports it, with its benchmark rows."""
    values = {**FITTED, "seq_overhead_us": seq_us}
    return PoolFit(pool="tp4", n_ttft=0, n_tpot=0, n_bench=len(checks), mfu=values["mfu"],
                   mem_bw_eff=values["mem_bw_eff"], step_overhead_ms=values["step_overhead_ms"], ttft_mape=0.01,
                   ttft_r2=0.99, tpot_mape=0.01, tpot_r2=0.99, seq_overhead_us=seq_us,
                   collective_us=values["collective_us"], group=("tp4",), checks=checks)


ROWS = (BenchCheck("tp4", 256, 128, 16, 50.0, 50.0, 20.0, 20.0), BenchCheck("tp4", 2048, 128, 64, 90.0, 90.0,
                                                                             25.0, 25.0))


def band(fit: PoolFit) -> tuple[int, int, int, float, int, float, int]:
    match = BAND.search(fit.notes[0])
    assert match, fit.notes[0]
    us, seqs, tokens, work, tp, engine, pct = match.groups()
    return int(us), int(seqs), int(tokens), float(work), int(tp), float(engine), int(pct)


def test_a_carried_pool_says_what_the_time_per_sequence_would_change_at_the_largest_row() -> None:
    reg = tp_fleet(concurrency=256)
    specs = pools_by_id(reg, Candidate(name="x"))
    got = {f.pool: f for f in carried((source(200.0, ROWS),), reg, specs)}
    # the row with the most clients: 64 sequences of 2048 + 128 / 2 tokens
    us, seqs, tokens, work, tp, engine, pct = band(got["tp8"])
    assert (us, seqs, tokens, tp) == (200, 64, 2112, 8)
    assert engine - work == pytest.approx(6.4, abs=0.11) and pct == round((work / engine - 1) * 100)
    # TP2's cache holds 12,207 tokens: 5 of those contexts, each 200 us x (4/2 - 1) slower as work
    us, seqs, tokens, work, tp, engine, pct = band(got["tp2"])
    assert (seqs, tp) == (5, 2) and work - engine == pytest.approx(1.0, abs=0.11) and pct > 0
    # the band comes before what to do about it
    assert got["tp8"].notes[0].endswith("check it with one benchmark row at TP8, or fit two TP degrees together")


def test_a_trace_fit_is_judged_at_a_full_batch_the_cache_holds() -> None:
    reg = tp_fleet(concurrency=256)
    specs = pools_by_id(reg, Candidate(name="x"))
    got = {f.pool: f for f in carried((source(200.0, ()),), reg, specs)}
    # TP2 holds 12,207 tokens: 11 contexts of 1,024; TP8 holds the batch limit's 256
    assert band(got["tp2"])[1:3] == (11, 1024)
    assert band(got["tp8"])[1:3] == (256, 1024)


def test_no_time_per_sequence_no_band() -> None:
    reg = tp_fleet(concurrency=256)
    specs = pools_by_id(reg, Candidate(name="x"))
    for f in carried((source(0.0, ROWS),), reg, specs):
        assert "per running sequence is work" not in f.notes[0]
        assert f.notes[0].endswith(f"check it with one benchmark row at TP{f.pool[2:]}, or fit two TP degrees together")
