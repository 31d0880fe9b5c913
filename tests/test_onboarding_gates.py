"""Every evidence gate with a passing file, a failing file and a malformed one, on values worked out by hand."""

from __future__ import annotations

import pytest

from onboarding import EvidenceError, gates
from onboarding.evidence import (
    parse_benchmark,
    parse_loss_curve,
    parse_operators,
    parse_parallelism,
    parse_precision,
)
from pool_registry import Registry
from replay.bench import closed_loop, default_requests
from replay.candidate import Candidate
from replay.fleet import pools_by_id


def test_operators_all_within_tolerance_pass() -> None:
    out = gates.operators(parse_operators("op,max_abs_err,tol\nmatmul,0.004,0.01\nsoftmax,0.0005,0.001\n"))
    assert out.status == gates.PASS
    assert out.reason == "2 operators within tolerance (closest: softmax 0.0005 of 0.001)"


def test_an_operator_out_of_tolerance_fails_naming_it() -> None:
    out = gates.operators(parse_operators("op,max_abs_err,tol\nmatmul,0.004,0.01\nsoftmax,0.003,0.001\n"))
    assert out.status == gates.FAIL
    assert out.reason == "1 of 2 operators out of tolerance: softmax 0.003 > 0.001 (line 3)"


@pytest.mark.parametrize(("text", "message"), [
    ("op,max_abs_err,tol\nmatmul,0.004,0.01\nsoftmax,n/a,0.001\n",
     "ops.csv:3:2: column max_abs_err: expected a number, got 'n/a'"),
    ("op,max_abs_err,tol\nmatmul,0.004\n", "ops.csv:2:3: expected 3 values, got 2"),
    ("op,err,tol\nmatmul,0.004,0.01\n", "ops.csv:1:2: unknown column 'err'; expected op,max_abs_err,tol"),
    ("op,max_abs_err,tol\nmatmul,-0.1,0.01\n", "ops.csv:2:2: column max_abs_err: must be >= 0, got -0.1"),
    ("", "ops.csv:1:1: empty file; expected the header op,max_abs_err,tol"),
])
def test_a_malformed_operator_file_names_file_line_and_column(text: str, message: str) -> None:
    with pytest.raises(EvidenceError) as err:
        parse_operators(text, "ops.csv")
    assert str(err.value) == message


PRECISION = "step,loss,grad_norm\n0,2.3,1.0\n10,2.2,1.2\n20,{loss},0.8\n30,2.0,{g}\n"


def test_precision_passes_with_finite_metrics_and_a_small_gradient_norm_spread() -> None:
    # grad norms 1.0, 1.2, 0.8, 1.0: mean 1, std sqrt(0.02) = 0.1414
    out = gates.precision(parse_precision(PRECISION.format(loss="2.1", g="1.0")), 0.5)
    assert out.status == gates.PASS and "spread (std/mean) 0.141 over 4 steps" in out.reason


def test_precision_fails_on_nan_and_on_a_wide_gradient_norm_spread() -> None:
    nan = gates.precision(parse_precision(PRECISION.format(loss="nan", g="1.0")), 0.5)
    assert nan.status == gates.FAIL and nan.reason.startswith("loss is nan at step 20 (line 4)")
    inf = gates.precision(parse_precision(PRECISION.format(loss="2.1", g="inf")), 0.5)
    assert inf.status == gates.FAIL and inf.reason.startswith("grad_norm is inf at step 30 (line 5)")
    # grad norms 1.0, 1.2, 0.8, 3.0: mean 1.5, std sqrt(3.08 / 4) = 0.8775, spread 0.585
    wide = gates.precision(parse_precision(PRECISION.format(loss="2.1", g="3.0")), 0.5)
    assert wide.status == gates.FAIL and "spread (std/mean) 0.585" in wide.reason


def test_a_malformed_precision_file_names_file_line_and_column() -> None:
    with pytest.raises(EvidenceError, match=r"^run.csv:3:3: column grad_norm: expected a number, got 'big'$"):
        parse_precision("step,loss,grad_norm\n0,2.3,1.0\n10,2.2,big\n", "run.csv")
    with pytest.raises(EvidenceError, match=r"^run.csv:1: missing column grad_norm; has: step, loss$"):
        parse_precision("step,loss\n0,2.3\n", "run.csv")


def test_parallelism_passes_at_or_above_the_target_and_fails_below() -> None:
    good = gates.parallelism(parse_parallelism("devices,mfu\n8,0.34\n16,0.30\n"), 0.3)
    assert good.status == gates.PASS and good.reason == "MFU 0.340 on 8 devices, 0.300 on 16 devices; target 0.3"
    low = gates.parallelism(parse_parallelism("devices,mfu\n8,0.34\n32,0.28\n"), 0.3)
    assert low.status == gates.FAIL and low.reason == "MFU below the target 0.3: 0.280 on 32 devices (line 3)"


def test_a_malformed_parallelism_file_names_file_line_and_column() -> None:
    with pytest.raises(EvidenceError, match=r"^mfu.csv:2:2: column mfu: a utilization must be <= 1, got 34$"):
        parse_parallelism("devices,mfu\n8,34\n", "mfu.csv")
    with pytest.raises(EvidenceError, match=r"^mfu.csv:2:1: column devices: expected a whole number >= 1"):
        parse_parallelism("devices,mfu\n0,0.3\n", "mfu.csv")


BASELINE = "step,loss\n0,4.0\n100,3.0\n200,2.5\n300,2.2\n400,2.0\n"


def test_regression_within_tolerance_at_the_key_steps_passes() -> None:
    base = parse_loss_curve(BASELINE)
    cand = parse_loss_curve(BASELINE.replace("400,2.0", "400,2.03"))  # 1.5 % off at the last step
    assert gates.key_steps(base, cand) == (100, 200, 300, 400)
    out = gates.regression(base, cand, 0.02)
    assert out.status == gates.PASS
    assert out.reason == ("loss within 2.0% at every key step: step 100 0.0%, step 200 0.0%, step 300 0.0%, "
                          "step 400 1.5%")


def test_regression_off_at_a_key_step_fails() -> None:
    base = parse_loss_curve(BASELINE)
    cand = parse_loss_curve(BASELINE.replace("400,2.0", "400,2.05").replace("0,4.0", "0,9.0"))
    out = gates.regression(base, cand, 0.02)  # step 0 is not a key step; step 400 is 2.5 % off
    assert out.status == gates.FAIL and out.reason.startswith("loss deviates more than 2.0% at 1 of 4 key steps")
    assert gates.regression(base, cand, 0.02, steps=(0,)).reason.endswith("step 0 125.0%")
    assert gates.regression(base, cand, 0.02, steps=(250,)).reason == "key step 250 is not in the baseline curve"


def test_a_malformed_loss_curve_names_file_line_and_column() -> None:
    with pytest.raises(EvidenceError, match=r"^cand.csv:4:1: column step: step 100 appears twice$"):
        parse_loss_curve("step,loss\n0,4.0\n100,3.0\n100,2.9\n", "cand.csv")
    with pytest.raises(EvidenceError, match=r"^cand.csv:3:2: column loss: expected a finite number, got 'nan'$"):
        parse_loss_curve("step,loss\n0,4.0\n100,nan\n", "cand.csv")
    with pytest.raises(EvidenceError, match=r"^cand.csv:2:1: column step: expected a whole number >= 0, got '1e3'$"):
        parse_loss_curve("step,loss\n1e3,4.0\n", "cand.csv")


def _bench_rows(fleet: Registry, scale: float) -> str:
    spec = pools_by_id(fleet, Candidate(name="t"))["mlu370-a"]
    lines = ["pool,isl,osl,concurrency,ttft_ms,tpot_ms"]
    for c in (1, 8):
        p = closed_loop(spec, c, 1024, 128, default_requests(c))
        lines.append(f"mlu370-a,1024,128,{c},{p.ttft_ms_p50 * scale:.3f},{(p.tpot_ms_p50 or 0) * scale:.3f}")
    return "\n".join(lines) + "\n"


def test_a_benchmark_within_tolerance_of_the_model_passes_and_one_off_fails(fleet: Registry) -> None:
    spec = pools_by_id(fleet, Candidate(name="t"))["mlu370-a"]
    near, compared = gates.benchmark(parse_benchmark(_bench_rows(fleet, 1.1)), spec, 0.25)
    assert near.status == gates.PASS and compared["error"].to_list() == pytest.approx([0.1, 0.1], abs=1e-4)
    far, _ = gates.benchmark(parse_benchmark(_bench_rows(fleet, 1.5)), spec, 0.25)
    assert far.status == gates.FAIL and "off by 50% (tolerance 25%)" in far.reason
    other, _ = gates.benchmark(parse_benchmark(_bench_rows(fleet, 1.0).replace("mlu370-a", "h100-a")), spec, 0.25)
    assert other.status == gates.FAIL and other.reason == "the table has no row for pool mlu370-a"


def test_a_malformed_benchmark_table_names_file_line_and_column() -> None:
    text = "pool,isl,osl,concurrency,ttft_ms,tpot_ms\nmlu370-a,1024,128,1,fast,10\n"
    with pytest.raises(EvidenceError, match=r"^bench.csv:2:5: column ttft_ms: expected a number, got 'fast'$"):
        parse_benchmark(text, "bench.csv")
