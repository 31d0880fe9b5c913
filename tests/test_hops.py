"""A link family's typical latency per collective hop, and what a calibration keeps where a link declares none."""

from __future__ import annotations

import dataclasses

import pytest

from pool_registry import Interconnect, Registry
from replay import Candidate, PoolOverride
from replay.calibrate import PoolFit, carried, start_values, undeclared_hop
from replay.fitting import Coefficient
from replay.fleet import pools_by_id
from replay.hops import TYPICAL, family, typical_hop
from tests.replay_fleets import chip, pool
from tests.test_calibrate import tp_fleet

# A 1 KB all-reduce over 8 devices is all latency: its 2 x 7 ring steps take 1024 x 14 / (8 x busbw) seconds, so a
# step takes 1024 / (8 x busbw): 1024 / 4.8e8 = 2.133 us at NCCL's 0.06 GB/s, 1024 / 3.2e8 = 3.2 us at RCCL's 0.04.
NVLINK_US = 1024 / (8 * 0.06e9) * 1e6
IF_US = 1024 / (8 * 0.04e9) * 1e6


def test_the_typical_hops_follow_from_a_tiny_all_reduces_bus_bandwidth() -> None:
    assert round(NVLINK_US, 4) == 2.1333 and round(IF_US, 9) == 3.2
    assert TYPICAL["nvlink"].hop_us == pytest.approx(NVLINK_US, rel=1e-12)
    assert TYPICAL["infinity_fabric"].hop_us == pytest.approx(IF_US, rel=1e-12)
    assert all(t.source and t.family for t in TYPICAL.values())


@pytest.mark.parametrize(("kind", "expected"), [
    ("nvlink4", "nvlink"), ("NVLink-5", "nvlink"), ("nvlink", "nvlink"), ("NVSwitch", "nvlink"),
    ("infinity_fabric", "infinity_fabric"), ("Infinity Fabric", "infinity_fabric"), ("xgmi", "infinity_fabric"),
    ("IF", "infinity_fabric"), ("xGMI-3", "infinity_fabric"),
    # families without a public measurement here keep 0: the fit says so instead of guessing
    ("hccs", None), ("roce", None), ("mlulink", None), ("pcie5", None), ("", None), ("ifb", None), ("test", None),
])
def test_a_link_kind_is_read_as_its_family_however_a_registry_spells_it(kind: str, expected: str | None) -> None:
    assert family(kind) == expected
    assert (typical_hop(kind) is None) == (expected is None)


def reg_with(latency_us: float) -> Registry:
    return tp_fleet(latency_us=latency_us, tps=(4, 8))


@pytest.mark.parametrize(("latency_us", "override", "expected"), [
    (0.0, None, NVLINK_US),   # the chip declares none: NVLink's typical figure
    (2.0, None, 2.0),         # the chip's own figure wins
    (0.0, 7.0, 7.0),          # and so does the pool's cost model (a calibrated candidate)
    (2.0, 0.0, 0.0),          # a cost model that says 0 means 0
])
def test_a_fit_starts_from_the_declared_hop_else_the_familys(latency_us: float, override: float | None,
                                                             expected: float) -> None:
    cand = Candidate(name="c", pools={"tp4": PoolOverride(collective_us=override)})
    spec = pools_by_id(reg_with(latency_us), cand)["tp4"]
    assert start_values(spec)["collective_us"] == pytest.approx(expected)
    assert (undeclared_hop(spec) is None) == (expected != NVLINK_US)


def test_a_link_of_an_unmeasured_family_keeps_no_latency() -> None:
    reg = reg_with(0.0)
    hccs = dataclasses.replace(reg.chips[0], interconnect=Interconnect("hccs", 196.0))
    spec = pools_by_id(dataclasses.replace(reg, chips=(hccs,)), Candidate(name="c"))["tp4"]
    assert undeclared_hop(spec) is None and start_values(spec)["collective_us"] == 0.0


def tp4_fit(hop: float) -> PoolFit:
    """A fit of the TP4 pool at one degree whose hop latency the evidence could not fit."""
    return PoolFit(pool="tp4", n_ttft=0, n_tpot=0, n_bench=6, mfu=0.45, mem_bw_eff=0.7, step_overhead_ms=3.0,
                   ttft_mape=0.01, ttft_r2=0.99, tpot_mape=0.01, tpot_r2=0.99, seq_overhead_us=0.0,
                   collective_us=hop, group=("tp4",),
                   coefficients=(Coefficient("collective_us", hop, "not identifiable", None, hop),))


def test_a_carried_pool_says_its_all_reduces_pay_the_familys_hop() -> None:
    reg = reg_with(0.0)
    specs = pools_by_id(reg, Candidate(name="c"))
    (tp8,) = carried((tp4_fit(NVLINK_US),), reg, specs)
    assert tp8.pool == "tp8" and tp8.collective_us == pytest.approx(NVLINK_US)
    assert "so TP8's all-reduces pay NVLink's typical 2.13 us a hop" in tp8.notes[0]
    # with the link's own figure the note names no typical one
    declared = reg_with(2.0)
    (tp8,) = carried((tp4_fit(2.0),), declared, pools_by_id(declared, Candidate(name="c")))
    assert "typical" not in tp8.notes[0] and "bytes alone" not in tp8.notes[0]
    # and a family nobody measured still says its all-reduces cost their bytes alone
    hccs = dataclasses.replace(reg.chips[0], interconnect=Interconnect("hccs", 196.0))
    other = dataclasses.replace(reg, chips=(hccs,))
    (tp8,) = carried((tp4_fit(0.0),), other, pools_by_id(other, Candidate(name="c")))
    assert "so TP8's all-reduces cost their bytes alone" in tp8.notes[0]


def test_a_fit_carried_to_a_chip_of_another_link_takes_that_links_hop() -> None:
    reg = tp_fleet(latency_us=0.0, tps=(4,))
    mi = dataclasses.replace(chip("mi", tflops=1307.4, bw_tbps=5.3, hbm_gb=192.0),
                             interconnect=Interconnect("xgmi", 448.0))
    reg = dataclasses.replace(reg, chips=(*reg.chips, mi), pools=(
        *reg.pools, pool("mi8", chip_id="mi", model_id="llama", dpr=8, concurrency=64)))
    (got,) = carried((tp4_fit(NVLINK_US),), reg, pools_by_id(reg, Candidate(name="c")), chips=True)
    assert got.pool == "mi8" and got.collective_us == pytest.approx(IF_US)
    declared = dataclasses.replace(reg, chips=(reg.chips[0], dataclasses.replace(
        mi, interconnect=Interconnect("xgmi", 448.0, latency_us=4.0))))
    (got,) = carried((tp4_fit(NVLINK_US),), declared, pools_by_id(declared, Candidate(name="c")), chips=True)
    assert got.collective_us is None  # nothing to write: the new chip's declared figure holds, through its link
    spec = pools_by_id(declared, Candidate(name="c", pools={"mi8": PoolOverride(**got.values())}))["mi8"]  # type: ignore[arg-type]
    assert spec.link(across_nodes=False)[1] == pytest.approx(4.0e-6)
