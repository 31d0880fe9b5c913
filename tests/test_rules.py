"""`hetpool rules`: promtool accepts what it writes, the summary names what was left out, bad input is one line."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
import yaml

from tests.conftest import FLEET, REPO
from tests.test_cli import run

PROFILES = REPO / "normalizers" / "profiles"
TRITON_LEFT_OUT = ("triton: nv_inference_request_duration_us", "triton: nv_inference_first_response_histogram_ms")


def promtool_check(path: Path) -> str:
    """promtool's verdict, lint included: duplicate record names would be a finding."""
    assert shutil.which("promtool"), "promtool not found; `make test` installs the Debian prometheus package"
    proc = subprocess.run(["promtool", "check", "rules", "--lint=all", "--lint-fatal", str(path)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


@pytest.mark.parametrize("placement", [("--registry", str(FLEET)), ("--registry", str(FLEET), "--pool-label", "pool"),
                                       ("--pool-label", "cluster_pool")],
                         ids=["registry", "pool-label-and-registry", "pool-label"])
def test_promtool_accepts_the_rules_of_the_shipped_profiles(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                             placement: tuple[str, ...]) -> None:
    out = tmp_path / "rules.yaml"
    code, printed, err = run(capsys, "--db", str(tmp_path / "none.duckdb"), "rules", *placement, "--out", str(out))
    assert code == 0, err
    assert "SUCCESS: " in promtool_check(out)
    groups = {g["name"]: g["rules"] for g in yaml.safe_load(out.read_text())["groups"]}
    assert ("hetpool_registry" in groups) == ("--pool-label" not in placement)
    records = {r["record"] for r in groups["hetpool_canonical"]}
    assert {"accelerator_utilization_ratio", "accelerator_memory_used_bytes", "accelerator_power_watts",
            "accelerator_energy_joules_total", "serving_requests_total", "serving_time_to_first_token_seconds_bucket",
            "accelerator_errors_total", "accelerator_error_state", "hetpool_software_version_info"} <= records
    alerts = {(r["alert"], r["labels"]["source"], r["labels"]["class"]) for r in groups["hetpool_alerts"]}
    assert {("AcceleratorMemoryUncorrectableFatal", "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "memory_uncorrectable"),
            ("AcceleratorDeviceLostFatal", "DCGM_FI_DEV_XID_ERRORS", "device_lost"),
            ("AcceleratorDeviceLostFatal", "npu_chip_info_error_code", "device_lost"),
            ("AcceleratorResetRequiredFatal", "npu_chip_info_error_code_9", "reset_required"),
            ("AcceleratorMemoryUncorrectableFatal", "gpu_afid_errors", "memory_uncorrectable"),
            ("AcceleratorMemoryUncorrectableFatal", "npu_chip_info_hbm_ecc_double_bit_error_cnt",
             "memory_uncorrectable")} <= alerts
    # recoverable and informational classes raise nothing
    assert not any(c in ("application", "memory_correctable") for _, _, c in alerts)
    assert all(r["labels"]["severity"] == "fatal" and "$labels.device" in r["annotations"]["summary"]
               for r in groups["hetpool_alerts"])
    head = out.read_text().split("groups:", 1)[0]
    assert all(f"#   {item}" in head for item in TRITON_LEFT_OUT)
    assert 'code="other"' in head  # codes PromQL cannot name, said where the rules are read
    assert all(f"not compiled: {item}" in printed for item in TRITON_LEFT_OUT)


def test_stdout_and_summary_on_stderr_from_the_db_registry(capsys: pytest.CaptureFixture[str],
                                                           fleet_db: Path) -> None:
    code, out, err = run(capsys, "--db", str(fleet_db), "rules")
    assert code == 0
    assert yaml.safe_load(out)["groups"][0]["name"] == "hetpool_registry"
    assert '"pool", "mlu370-a", "node", "mlu370-a-.*"' in out  # the example fleet's node_pattern "mlu370-a-*"
    assert "from 9 profiles (amd, ascend, cambricon, dcgm, gaudi, sglang, tgi, triton, vllm)" in err


def test_json_summary(capsys: pytest.CaptureFixture[str], fleet_db: Path, tmp_path: Path) -> None:
    code, out, _ = run(capsys, "--db", str(fleet_db), "--json", "rules", "--out", str(tmp_path / "r.yaml"))
    summary = json.loads(out)
    assert code == 0 and summary["profiles"][0] == "amd" and summary["groups"]["hetpool_registry"] == 1
    assert [u.split(": ")[:2] for u in summary["unsupported"]] == [i.split(": ") for i in TRITON_LEFT_OUT]


def test_an_added_profile_dir_is_compiled_too(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    extra = tmp_path / "profiles"
    extra.mkdir()
    (extra / "enflame.yaml").write_text(
        "profile: enflame\nvendor: enflame\ndetect: [enflame_gcu_]\nnode_labels: [host]\ndevice_labels: [minor]\n"
        "metrics:\n  enflame_gcu_power_mw: {metric: accelerator.power, unit: mW, min: 0}\n")
    code, out, err = run(capsys, "--db", str(tmp_path / "none.duckdb"), "rules", "--pool-label", "pool",
                         "--profiles-dir", str(extra))
    assert code == 0, err
    power = next(r for r in yaml.safe_load(out)["groups"][0]["rules"] if r["record"] == "accelerator_power_watts")
    assert "(enflame_gcu_power_mw{pool!=\"\"} >= 0 < +Inf) * 0.001" in power["expr"]
    assert "10 profiles" in err


def bad_profile(tmp: Path) -> Path:
    d = tmp / "bad"
    d.mkdir()
    (d / "enflame.yaml").write_text("profile: enflame\ndetect: [enflame_]\nmetrics:\n"
                                    "  enflame_gcu_temp: {metric: accelerator.temperature, unit: kelvin}\n")
    return d


def empty_dir(tmp: Path) -> Path:
    d = tmp / "empty"
    d.mkdir()
    return d


# (id, the arguments after `rules` given the temporary directory, what the one line must say)
BAD: list[tuple[str, Callable[[Path], list[str]], str]] = [
    ("missing-dir", lambda t: ["--profiles-dir", str(t / "nope")], "nope: not a directory of profile YAML files"),
    ("malformed-profile", lambda t: ["--profiles-dir", str(bad_profile(t))],
     "enflame.yaml:4: metrics.enflame_gcu_temp.unit: unit 'kelvin' does not convert to celsius"),
    ("empty-dir", lambda t: ["--profiles-dir", str(empty_dir(t))], "empty: no *.yaml profile files in this directory"),
    ("bad-pool-label", lambda t: ["--pool-label", "pool-id"], "--pool-label 'pool-id' is not a label name"),
    ("no-registry", lambda t: [], "no registry to place series in pools: none is loaded into"),
    ("bad-registry", lambda t: ["--registry", str(t / "fleet.yaml")], "fleet.yaml"),
    ("unwritable-out", lambda t: ["--pool-label", "pool", "--out", str(t / "no" / "r.yaml")], "cannot write"),
]


@pytest.mark.parametrize(("args", "said"), [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_input_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                          args: Callable[[Path], list[str]], said: str) -> None:
    code, out, err = run(capsys, "--db", str(tmp_path / "none.duckdb"), "rules", *args(tmp_path))
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and said in err, err


TINY = """\
profile: tiny
vendor: tiny
detect: [tiny_]
node_labels: [host]
device_labels: [gpu]
versions: {drv: driver}
metrics:
  tiny_util: {metric: accelerator.utilization, unit: percent}
errors:
  tiny_throttle:
    kind: bitmask
    bits:
      0: {code: idle, class: unknown/informational}
      2: {code: power_cap, class: power/recoverable}
  tiny_xid:
    kind: sticky_code
    default: unknown/recoverable
    codes: {79: device_lost/fatal}
  tiny_ecc:
    kind: counter
    code_label: xid
    default: unknown/recoverable
    codes: {48: memory_uncorrectable/fatal}
"""
# the recorded error and version series of the profile above at each minute, as promtool's evaluator gives them
TINY_TEST = """\
rule_files: [rules.yaml]
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
      - series: 'tiny_throttle{host="n1", gpu="0", pool="p"}'
        values: '0 5 4 2'
      - series: 'tiny_xid{host="n1", gpu="1", pool="p"}'
        values: '0 79 5 NaN'
      - series: 'tiny_ecc{host="n1", gpu="1", pool="p", xid="48"}'
        values: '3 3 0'
      - series: 'tiny_ecc{host="n1", gpu="1", pool="p", xid="13"}'
        values: '1 2 2'
      - series: 'tiny_util{host="n1", gpu="0", pool="p", drv="1.2"}'
        values: '50'
    promql_expr_test:
%s
"""
BASE = 'node="n1", pool="p"'
THROTTLE = {  # minute -> (code, class, severity, value); 2 sets bit 1, which the table does not name: no series
    0: [("idle", "unknown", "informational", 0), ("power_cap", "power", "recoverable", 0)],
    1: [("idle", "unknown", "informational", 1), ("power_cap", "power", "recoverable", 1)],
    2: [("idle", "unknown", "informational", 0), ("power_cap", "power", "recoverable", 1)],
    3: [],
}
XID = {  # 5 is no code of the table: "other", with the default class; NaN is no sample
    0: [("79", "device_lost", "fatal", 0), ("other", "unknown", "recoverable", 0)],
    1: [("79", "device_lost", "fatal", 1), ("other", "unknown", "recoverable", 0)],
    2: [("79", "device_lost", "fatal", 0), ("other", "unknown", "recoverable", 1)],
    3: [],
}
ECC = {  # the code is the label; the raw count, so 3 -> 0 is a restart a reader sees
    0: [("48", "memory_uncorrectable", "fatal", 3), ("13", "unknown", "recoverable", 1)],
    2: [("48", "memory_uncorrectable", "fatal", 0), ("13", "unknown", "recoverable", 2)],
}


def _case(expr: str, minute: int, samples: Sequence[tuple[str, float]]) -> str:
    lines = [f"      - expr: '{expr}'", f"        eval_time: {minute}m"]
    lines.append("        exp_samples:" + ("" if samples else " []"))
    lines.extend(f"          - labels: '{labels}'\n            value: {value}" for labels, value in samples)
    return "\n".join(lines)


def test_promtool_evaluates_error_states_counters_and_versions(capsys: pytest.CaptureFixture[str],
                                                               tmp_path: Path) -> None:
    extra = tmp_path / "profiles"
    extra.mkdir()
    (extra / "tiny.yaml").write_text(TINY)
    code, _, err = run(capsys, "--db", str(tmp_path / "none.duckdb"), "rules", "--pool-label", "pool",
                       "--profiles-dir", str(extra), "--no-status", "--out", str(tmp_path / "rules.yaml"))
    assert code == 0, err
    cases = []
    for device, table, name in (("0", THROTTLE, "accelerator_error_state"), ("1", XID, "accelerator_error_state"),
                                ("1", ECC, "accelerator_errors_total")):
        for minute, rows in table.items():
            samples = [(f'{name}{{{BASE}, device="{device}", code="{c}", error_class="{cls}", severity="{sev}"}}', v)
                       for c, cls, sev, v in rows]
            cases.append(_case(f'{name}{{node="n1", device="{device}"}}', minute, samples))
    version = 'hetpool_software_version_info{node="n1", pool="p", component="driver", version="1.2"}'
    cases.append(_case("hetpool_software_version_info", 0, [(version, 1)]))
    (tmp_path / "test.yaml").write_text(TINY_TEST % "\n".join(cases))
    proc = subprocess.run(["promtool", "test", "rules", str(tmp_path / "test.yaml")], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
