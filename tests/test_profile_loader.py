"""Profile YAML: every shipped dialect loads, and bad profiles are refused with file, line and field."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from canonical.metrics import ErrorClass
from normalizers import ProfileError, load_profile, load_profile_text, load_profiles
from normalizers.profile.sets import builtin_profiles

GOOD = """\
profile: tiny
detect: [tiny_]
node_labels: [host]
metrics:
  tiny_util: {metric: accelerator.utilization, unit: percent, min: 0, max: 100}
"""


def test_every_dialect_of_the_issue_is_shipped() -> None:
    names = {p.name for p in builtin_profiles()}
    assert names == {"dcgm", "amd", "ascend", "gaudi", "cambricon", "vllm", "sglang", "tgi", "triton"}


def test_unit_factors_of_the_shipped_profiles() -> None:
    ps = load_profiles()
    assert ps.get("dcgm").metrics["DCGM_FI_DEV_FB_USED"][0].factor == 2**20
    assert ps.get("gaudi").metrics["habanalabs_power_mW"][0].factor == 1e-3
    assert ps.get("dcgm").metrics["DCGM_FI_DEV_GPU_UTIL"][0].factor == 0.01
    assert ps.get("dcgm").metrics["DCGM_FI_DEV_SM_CLOCK"][0].factor == 1e6
    assert ps.get("dcgm").metrics["DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"][0].factor == 1e-3
    assert ps.get("amd").metrics["gpu_energy_consumed"][0].factor == 1e-6
    assert ps.get("triton").metrics["nv_inference_request_duration_us"][0].factor == 1e-6
    assert ps.get("ascend").metrics["npu_chip_info_hbm_total_memory"][0].factor == 2**20


@pytest.mark.parametrize("text, line, message", [
    (GOOD.replace("accelerator.utilization", "accelerator.utilisation"), 5,
     "metrics.tiny_util.metric: unknown canonical metric 'accelerator.utilisation'; known: accelerator.utilization"),
    (GOOD.replace("unit: percent", "unit: MiB"), 5,
     "metrics.tiny_util.unit: unit 'MiB' does not convert to ratio (accelerator.utilization); expected one of: "
     "ratio, percent"),
    (GOOD.replace("detect:", "detetc:"), 2, "detetc: unknown key 'detetc'; did you mean 'detect'?"),
    (GOOD.replace("min: 0", "minimum: 0"), 5, "metrics.tiny_util.minimum: unknown key 'minimum'"),
    (GOOD + "errors:\n  tiny_xid: {kind: sticky_code, codes: {13: application/oops}, default: unknown/fatal}\n", 7,
     "errors.tiny_xid.codes.13: expected error_class/severity"),
    (GOOD + "errors:\n  tiny_ecc: {kind: counter, class: memory_uncorrectable/fatal}\n", 7,
     "errors.tiny_ecc: a counter needs 'code'"),
    (GOOD + "derived:\n  - {metric: accelerator.memory.total, sum: [a], unit: MiB}\n", 7,
     "derived[0].sum: expected at least two source metrics"),
    (GOOD + "derived:\n  - {metric: serving.prefix_cache.hit_ratio, ratio: [a, b, c], unit: ratio}\n", 7,
     "derived[0].ratio: expected two source metrics: the numerator, then the denominator"),
    (GOOD + "derived:\n  - {metric: serving.prefix_cache.hit_ratio, ratio: [a, b], sum: [a, b], unit: ratio}\n", 7,
     "derived[0].sum: unknown key 'sum'"),
    (GOOD.replace("min: 0,", "labels: {gpu: le},"), 5, "attribute 'le' is written by the normalizer itself"),
    ("profile: Bad Name\ndetect: [x]\nmetrics: {}\n", 1, "bad profile name 'Bad Name'"),
])
def test_bad_profiles_name_file_line_and_field(text: str, line: int, message: str) -> None:
    with pytest.raises(ProfileError) as info:
        load_profile_text(text, "tiny.yaml")
    shown = [str(p) for p in info.value.problems]
    assert any(s.startswith(f"tiny.yaml:{line}: ") and message in s for s in shown), shown


def test_all_problems_are_reported_at_once() -> None:
    text = GOOD.replace("accelerator.utilization", "nope").replace("detect:", "detetc:")
    with pytest.raises(ProfileError) as info:
        load_profile_text(text, "tiny.yaml")
    assert len(info.value.problems) >= 2


def test_profile_name_must_match_its_file(tmp_path: Path) -> None:
    path = tmp_path / "other.yaml"
    path.write_text(GOOD)
    with pytest.raises(ProfileError, match=r"profile name 'tiny' differs from the file name 'other\.yaml'"):
        load_profile(path)


def test_unknown_profile_lists_the_known_ones() -> None:
    with pytest.raises(Exception, match=r"unknown profile 'dcgn'; known: amd, ascend, cambricon, dcgm, gaudi, "):
        load_profiles().get("dcgn")


def test_detection_by_name_and_prefix() -> None:
    ps = load_profiles()
    assert ps.detect("DCGM_FI_DEV_GPU_UTIL").name == "dcgm"  # type: ignore[union-attr]
    assert ps.detect("vllm:time_to_first_token_seconds_bucket").name == "vllm"  # type: ignore[union-attr]
    assert ps.detect("npu_chip_info_error_code_7").name == "ascend"  # type: ignore[union-attr]
    assert ps.detect("habanalabs_power_mW").name == "gaudi"  # type: ignore[union-attr]
    assert ps.detect("furiosa_npu_alive") is None


def test_profiles_dir_adds_and_replaces(tmp_path: Path) -> None:
    (tmp_path / "tiny.yaml").write_text(GOOD)
    (tmp_path / "vllm.yaml").write_text(
        'profile: vllm\ndetect: ["vllm:"]\nmetrics:\n  "vllm:util": {metric: accelerator.utilization, unit: ratio}\n')
    ps = load_profiles([tmp_path])
    assert ps.get("tiny").node_labels == ("host",)
    assert ps.replaced == ("vllm",)
    assert set(ps.get("vllm").metrics) == {"vllm:util"}


def test_bad_profile_in_a_dir_fails_the_whole_set(tmp_path: Path) -> None:
    (tmp_path / "tiny.yaml").write_text(GOOD.replace("percent", "parsecs"))
    with pytest.raises(ProfileError, match=r"tiny\.yaml:5: metrics\.tiny_util\.unit"):
        load_profiles([tmp_path])


def test_ascend_codes_agree_with_the_device_plugin_fault_table(corpus: Path) -> None:
    """Each Ascend code the profile lists has the handling level the device plugin's table gives it."""
    table = json.loads((corpus / "ascend" / "mind-cluster" / "ascend-device-plugin_build_faultCode.json").read_text())
    level_of = {code.upper(): key.removesuffix("Codes") for key, codes in table.items() for code in codes}
    spec = load_profiles().get("ascend").errors["npu_chip_info_error_code"]
    levels = re.findall(r"^      ([0-9A-F]{8}): (\w+)$", Path("normalizers/profiles/ascend.yaml").read_text(), re.M)
    assert len(levels) >= 16
    for code, level in levels:
        assert level_of[code] == level, code
        assert code in spec.codes
    assert spec.codes["80E01801"] == ErrorClass("application", "recoverable")      # RestartBusiness
    assert spec.codes["80E3A201"] == ErrorClass("device_lost", "fatal")            # SeparateNPU
    assert spec.format_code(2162169857) == "80E01801"
    assert load_profiles().get("ascend").errors["npu_chip_info_error_code_9"].codes == spec.codes
