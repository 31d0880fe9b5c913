"""Bands from a fit's standard errors: each fitted coefficient moved by its factor, the changes combined in
quadrature in log space; carried by the calibrated candidate into `replay bench` and `plan`, where a layout that
meets a target only inside its band is marked."""

from __future__ import annotations

import dataclasses
import math
import shutil
from pathlib import Path

import pytest

from pool_registry import load_registry
from replay import Candidate, CandidateError, PoolOverride, closed_loop, default_requests, load_candidate_text
from replay.bands import bands
from replay.fleet import pools_by_id
from replay.planner import PlanSettings, Targets, plan_model, report_lines
from tests.cli import run
from tests.conftest import REPO
from tests.replay_fleets import fleet, pool


def spec(mfu: float = 0.5):  # type: ignore[no-untyped-def]
    return dataclasses.replace(pools_by_id(fleet(pool("p")), Candidate(name="t"))["p"], mfu=mfu, mem_bw_eff=0.5)


def test_one_coefficients_factor_moves_a_proportional_prediction_by_that_factor() -> None:
    (got,) = bands(spec(), {"mfu": 1.1}, lambda s: [10.0 / s.mfu])   # 20 at mfu 0.5
    assert got == pytest.approx((20 / 1.1, 20 * 1.1))


def test_two_coefficients_combine_in_quadrature_and_a_bound_is_not_crossed() -> None:
    (got,) = bands(spec(), {"mfu": 1.1, "mem_bw_eff": 1.1}, lambda s: [1.0 / (s.mfu * s.mem_bw_eff)])
    factor = math.exp(math.sqrt(2) * math.log(1.1))    # 1.1 ^ sqrt 2 = 1.1443
    assert got == pytest.approx((4 / factor, 4 * factor))
    # at mfu 0.95 a factor 1.1 up would pass 1: it stops at 1 (a 5.3 % move), the larger move down (10 %) counts
    (near,) = bands(spec(0.95), {"mfu": 1.1}, lambda s: [1.0 / s.mfu])
    assert near == pytest.approx((1 / 0.95 / 1.1, 1 / 0.95 * 1.1))
    assert bands(spec(), {"mfu": 1.0}, lambda s: [1.0 / s.mfu]) == [(2.0, 2.0)]  # no error, no band
    assert bands(spec(), {"mfu": 1.1}, lambda s: [None]) == [None]


def _fleet_db(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    shutil.copytree(REPO / "examples" / "onboarding", tmp_path / "onboarding")
    shutil.copy(REPO / "examples" / "fleet.yaml", tmp_path / "fleet.yaml")
    db = str(tmp_path / "h.duckdb")
    assert run(capsys, "--db", db, "registry", "load", str(tmp_path / "fleet.yaml"))[0] == 0
    return db


CANDIDATE = "name: fitted\npolicy: observed\npools: {h100-a: {mfu: 0.45, spread: {mfu: 1.2}}}\n"


def test_bench_shows_each_median_with_the_band_of_the_candidates_spread(capsys: pytest.CaptureFixture[str],
                                                                          tmp_path: Path) -> None:
    db = _fleet_db(tmp_path, capsys)
    (tmp_path / "fitted.yaml").write_text(CANDIDATE)
    code, out, err = run(capsys, "--db", db, "replay", "bench", "--pool", "h100-a", "--candidate",
                         str(tmp_path / "fitted.yaml"), "--concurrency", "4", "--isl", "2048", "--osl", "16")
    assert code == 0, err
    reg = load_registry(tmp_path / "fleet.yaml")
    cand = load_candidate_text(CANDIDATE, reg, "c")
    assert cand.pools["h100-a"].spread == {"mfu": 1.2}
    base = pools_by_id(reg, cand)["h100-a"]

    def ttft(mfu: float) -> float:
        return closed_loop(dataclasses.replace(base, mfu=mfu), 4, 2048, 16, default_requests(4)).ttft_ms_p50

    mid = ttft(0.45)
    half = max(abs(math.log(ttft(0.54) / mid)), abs(math.log(ttft(0.375) / mid)))
    assert "band within the fit's standard errors (mfu x/ 1.2):" in out
    assert f"TTFT p50 {mid / math.exp(half):.1f}-{mid * math.exp(half):.1f} ms" in out
    with pytest.raises(CandidateError, match=r"spread\.mfu"):
        load_candidate_text(CANDIDATE.replace("1.2}", "0.9}"), reg, "c")


def test_the_planner_marks_a_layout_that_meets_a_target_only_inside_its_band() -> None:
    reg = load_registry(REPO / "examples" / "fleet.yaml")
    cand = Candidate(name="c", pools={"h100-a": PoolOverride(spread={"mfu": 1.3, "mem_bw_eff": 1.3})})
    settings = PlanSettings(isl=1024, osl=64, concurrency=(8,))
    free = plan_model(reg, "llama-3.1-70b", ("h100-a",), settings, cand)
    first = next(p for p in free.plans if p.fits)
    assert first.ttft_band is not None and first.ttft_band[0] < first.ttft_ms_p50 < first.ttft_band[1]
    target = (first.ttft_ms_p50 + first.ttft_band[1]) / 2  # met at the fit's values, not at the band's far end
    aimed = plan_model(reg, "llama-3.1-70b", ("h100-a",), dataclasses.replace(settings, targets=Targets(target)),
                       cand)
    same = next(p for p in aimed.plans if p.layout == first.layout)
    assert same.meets_targets and same.meets_in_band_only
    assert any(line.rstrip().endswith("band") and line.startswith("h100-a") for line in report_lines(aimed))


def test_only_fitted_coefficients_with_a_finite_error_carry_a_spread() -> None:
    from replay.bands import spread_of
    from replay.fitting import Coefficient
    got = spread_of([Coefficient("mfu", 0.4, "fitted", 1.05, 0.4), Coefficient("step_overhead_ms", 2.0, "fitted",
                                                                                math.inf, 0.0),
                     Coefficient("collective_us", 2.0, "not identifiable", 3.0, 2.0)])
    assert got == {"mfu": 1.05}
