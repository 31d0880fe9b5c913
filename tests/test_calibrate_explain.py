"""A fit says when the model cannot explain its own rows, names the worst, and flags coefficients outside what
silicon sustains: the record of one pool at given coefficients, with observations set by hand around the model."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from replay import Candidate, parse_bench_table
from replay.calibrate.evidence import Bench
from replay.calibrate.fit import fit_record, worst_rows
from replay.calibrate.record import EXPLAINS, PHYSICAL_MIN
from replay.fleet import pools_by_id
from tests.replay_fleets import fleet, pool

ROWS = ((256, 64, 1), (256, 64, 2), (1024, 64, 2), (1024, 64, 4))
TTFT_FACTORS = (1.0, 1.3, 1.6, 0.4)   # measured = model x factor
TPOT_FACTORS = (1.05, 1.05, 1.05, 1.05)


def spec(**values: float):  # type: ignore[no-untyped-def]
    s = pools_by_id(fleet(pool("p", concurrency=8)), Candidate(name="t"))["p"]
    return dataclasses.replace(s, **values)


def table(model_ttft: np.ndarray, model_tpot: np.ndarray) -> Bench:
    lines = ["pool,isl,osl,concurrency,ttft_ms,tpot_ms"]
    for (isl, osl, c), t, p, ft, fp in zip(ROWS, model_ttft, model_tpot, TTFT_FACTORS, TPOT_FACTORS, strict=True):
        lines.append(f"p,{isl},{osl},{c},{float(t) * 1000 * ft!r},{float(p) * 1000 * fp!r}")
    return Bench(parse_bench_table("\n".join(lines) + "\n"))


def record(s):  # type: ignore[no-untyped-def]
    probe = Bench(parse_bench_table("pool,isl,osl,concurrency,ttft_ms,tpot_ms\n" + "".join(
        f"p,{isl},{osl},{c},1,1\n" for isl, osl, c in ROWS)))
    bench = table(*probe.model(s))
    return fit_record(s, s, [], ("p",), [bench], [], None, bench, None)


def test_a_fit_that_misses_its_own_rows_says_so_and_names_the_worst() -> None:
    f = record(spec())
    # TTFT errors |m - o| / o = |1 - f| / f: 0, 0.2308, 0.375, 1.5; their median (0.2308 + 0.375) / 2 = 0.3029
    assert f.ttft_mdape == pytest.approx((0.3 / 1.3 + 0.6 / 1.6) / 2, rel=1e-6) and f.ttft_mdape > EXPLAINS["TTFT"]
    assert f.tpot_mdape == pytest.approx(0.05 / 1.05, rel=1e-6)  # within the 10 % of TPOT
    assert f.explains is False
    (note,) = [n for n in f.notes if n.startswith("the model cannot explain")]
    assert note.startswith("the model cannot explain p's own rows: in-sample median error TTFT 30.3 % (limit "
                           "20.0 %), TPOT 4.8 % (limit 10.0 %)")
    # the worst: the row measured at 0.4 x the model (+150 %), then 1.6 x (-38 %), then 1.3 x (-23 %)
    worst = note.split("Worst: ")[1].split("; ")
    assert [w.split(":")[0] for w in worst] == ["ISL 1024, OSL 64 at concurrency 4", "ISL 1024, OSL 64 at "
                                                "concurrency 2", "ISL 256, OSL 64 at concurrency 2"]
    assert worst[0].endswith("(+150 %)") and worst[1].endswith("(-38 %)") and worst[2].endswith("(-23 %)")
    assert f.unphysical == ()


def test_coefficients_below_what_silicon_sustains_are_a_missing_term_not_a_fit() -> None:
    f = record(spec(mfu=0.017, mem_bw_eff=0.2))
    assert f.unphysical == ("mfu", "mem_bw_eff")
    notes = [n for n in f.notes if n.startswith("fitted ")]
    assert notes[0] == ("fitted mfu 0.017 is below 0.05, a share of peak no working engine runs at: a sign of a term "
                        "the model lacks (engine time, a collective, arrivals or the schedule) folded into mfu, not a "
                        "measurement of the chip")
    assert notes[1].startswith("fitted mem_bw_eff 0.2 is below 0.3")
    assert PHYSICAL_MIN == {"mfu": 0.05, "mem_bw_eff": 0.3}
    assert record(spec(mfu=0.05, mem_bw_eff=0.3)).unphysical == ()  # the limits themselves are physical


def test_worst_rows_rank_by_the_log_of_the_miss_and_a_row_not_served_first() -> None:
    compared = [{"TTFT": (np.array([1.0, 2.0, np.nan]), np.array([1.0, 1.0, 1.0]), ["a", "b", "c"]),
                 "TPOT": (np.array([0.5]), np.array([1.0]), ["d"])}]
    got = worst_rows(compared)
    assert [text.split(":")[0] for _, text in got] == ["c", "b", "d"]
    assert got[0] == (math.inf, "c: TTFT none modelled, 1e+03 ms measured (not served)")
    assert got[1][0] == pytest.approx(math.log(2)) and got[2][0] == pytest.approx(math.log(2))
