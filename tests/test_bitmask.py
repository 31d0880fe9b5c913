"""Bitmask error signals: each set bit is its own code; a bit that stays set is one event; unknown bits are rejects."""

from __future__ import annotations

import json

import polars as pl
import pytest

from collectors.sources import whole_scrapes
from normalizers import Context, ExpositionParser, Normalizer, Options, ProfileError, load_profile_text
from normalizers.profile.sets import ProfileSet

# NVML's clocks-event (throttle) reasons, as dcgm-exporter exposes them in DCGM_FI_DEV_CLOCKS_EVENT_REASONS
PROFILE = """\
profile: nv
detect: [DCGM_]
node_labels: [Hostname]
device_labels: [gpu]
metrics:
  DCGM_FI_DEV_GPU_UTIL: {metric: accelerator.utilization, unit: percent}
errors:
  DCGM_FI_DEV_CLOCKS_EVENT_REASONS:
    kind: bitmask
    levels: {slow: thermal/recoverable}
    bits:
      0: {code: gpu_idle, class: unknown/informational}
      1: {code: applications_clocks_setting, class: unknown/informational}
      2: {code: sw_power_cap, class: power/informational}
      3: {code: hw_slowdown, class: thermal/recoverable}
      4: {code: sync_boost, class: unknown/informational}
      5: {code: sw_thermal_slowdown, class: thermal/informational}
      6: {code: hw_thermal_slowdown, class: slow}
      7: {code: hw_power_brake_slowdown, class: power/recoverable}
      8: unknown/informational
"""
T0 = 1_795_000_000_000
NAME = "DCGM_FI_DEV_CLOCKS_EVENT_REASONS"


def run(*values: str) -> tuple[pl.DataFrame, pl.DataFrame, int]:
    """Normalize one scrape per value (a minute apart); return events, rejects and folded reads."""
    profile = load_profile_text(PROFILE, "nv.yaml")
    n = Normalizer(Context(ProfileSet({"nv": profile}), pool="p"), Options(default_ts_ms=T0, now_ms=T0))
    text = "".join(f'{NAME}{{gpu="0",Hostname="h1"}} {v} {T0 + 60_000 * i}\n' for i, v in enumerate(values))
    parser = ExpositionParser()
    events, rejects, folded, reads = [], [], 0, 0
    for batch in whole_scrapes(iter([parser.feed(text.encode())]), parser.finish, T0):
        reads += batch.reads
        out = n.normalize(batch)
        events.append(out.samples)
        rejects.append(out.rejects)
        folded += out.folded
    samples, rejected = pl.concat(events), pl.concat(rejects)
    assert reads == int(samples["n_src"].sum() or 0) + rejected.height + folded  # one record, however many codes
    return samples, rejected, folded


def codes(samples: pl.DataFrame) -> list[tuple[int, str, str, str]]:
    return [(ts - T0, a["code"], a["error_class"], a["severity"]) for ts, a in zip(
        samples["ts"], (json.loads(x) for x in samples["attributes"].cast(pl.String)), strict=True)]


def test_two_bits_set_are_two_codes_of_one_sample() -> None:
    samples, rejects, _ = run("136")  # 136 = 128 + 8: bits 7 and 3
    assert rejects.height == 0
    assert sorted(codes(samples)) == [(0, "hw_power_brake_slowdown", "power", "recoverable"),
                                      (0, "hw_slowdown", "thermal", "recoverable")]
    assert samples["metric"].cast(pl.String).unique().to_list() == ["accelerator.errors"]
    assert samples["value"].to_list() == [1.0, 1.0]


def test_a_bit_is_an_event_when_it_turns_on() -> None:
    # 4: sw_power_cap on; 4 again: nothing new; 68 = 64 + 4: hw_thermal on; 0: all off; 260 = 256 + 4: both on
    samples, _, folded = run("4", "4", "68", "0", "260")
    assert sorted(codes(samples)) == [(0, "sw_power_cap", "power", "informational"),
                                      (120_000, "hw_thermal_slowdown", "thermal", "recoverable"),  # a level
                                      (240_000, "8", "unknown", "informational"),  # no code: the bit's number
                                      (240_000, "sw_power_cap", "power", "informational")]
    assert folded == 2  # the repeat of 4, and 0


def test_an_unknown_bit_is_a_reject_naming_it_and_the_known_bits() -> None:
    samples, rejects, _ = run("1032")  # 1024 + 8: bit 10 is not in the profile
    assert samples.height == 0
    reason = rejects["reason"][0]
    assert reason.startswith(f"value 1032 of {NAME} sets bit 10, which the profile does not name; known bits: "
                             "0 (gpu_idle), 1 (applications_clocks_setting), 2 (sw_power_cap), 3 (hw_slowdown)")
    assert reason.endswith("7 (hw_power_brake_slowdown), 8")
    _, rejects, _ = run(str(2**40 + 2**12 + 1))
    assert "sets bits 12, 40, which" in rejects["reason"][0]


@pytest.mark.parametrize("value", ["2.5", "-8"])
def test_a_value_that_is_no_mask_is_a_reject(value: str) -> None:
    samples, rejects, _ = run(value)
    assert samples.height == 0
    assert rejects["reason"].to_list() == [
        f"value {float(value)} of {NAME} is not a bitmask; expected a whole number from 0 to 2^64-1"]


def test_other_series_of_the_batch_are_untouched() -> None:
    profile = load_profile_text(PROFILE, "nv.yaml")
    n = Normalizer(Context(ProfileSet({"nv": profile}), pool="p"), Options(default_ts_ms=T0, now_ms=T0))
    parser = ExpositionParser()
    text = f'DCGM_FI_DEV_GPU_UTIL{{gpu="0",Hostname="h1"}} 250\n{NAME}{{gpu="0",Hostname="h1"}} 8\n'
    outs = [n.normalize(b) for b in whole_scrapes(iter([parser.feed(text.encode())]), parser.finish, T0)
            if b.samples.height]
    assert sum(o.rejects.height for o in outs) == 0
    assert sorted(v for o in outs for v in o.samples["value"].to_list()) == [1.0, 2.5]  # no max on this utilization


@pytest.mark.parametrize("bits, message", [
    ("{64: power/fatal}", "errors.X.bits.64: bad bit '64'; expected a whole number from 0 to 63"),
    ("{-1: power/fatal}", "errors.X.bits.-1: bad bit '-1'"),
    ("{x: power/fatal}", "errors.X.bits.x: bad bit 'x'"),
    ("{1.5: power/fatal}", "errors.X.bits.1.5: bad bit '1.5'"),
    ("{3: power/oops}", "errors.X.bits.3: expected error_class/severity"),
    ("{3: {code: hot}}", "errors.X.bits.3.class: missing required field"),
    ("{}", "errors.X.bits: expected at least one bit"),
])
def test_bad_bits_are_refused_with_line_and_field(bits: str, message: str) -> None:
    text = f"profile: nv\ndetect: [X]\nmetrics: {{}}\nerrors:\n  X: {{kind: bitmask, bits: {bits}}}\n"
    with pytest.raises(ProfileError) as info:
        load_profile_text(text, "nv.yaml")
    assert any(str(p).startswith(f"nv.yaml:5: {message}") for p in info.value.problems), info.value.problems


def test_bitmask_and_code_tables_do_not_mix() -> None:
    text = ("profile: nv\ndetect: [X]\nmetrics: {}\nerrors:\n  X: {kind: bitmask, default: unknown/fatal}\n"
            "  Y: {kind: sticky_code, default: unknown/fatal, bits: {1: power/fatal}}\n")
    with pytest.raises(ProfileError) as info:
        load_profile_text(text, "nv.yaml")
    found = [str(p) for p in info.value.problems]
    assert "nv.yaml:5: errors.X.bits: missing: kind bitmask needs 'bits'" in "\n".join(found)
    assert any(p.startswith("nv.yaml:5: errors.X.default: 'default' does not apply to kind bitmask") for p in found)
    assert any(p.startswith("nv.yaml:6: errors.Y.bits: 'bits' only applies to kind bitmask") for p in found)
