"""Normalization: units, identities, derived rows, histograms, checks, pools and versions, all accounted for."""

from __future__ import annotations

import json

import polars as pl
import pytest

from collectors.sources import whole_scrapes
from normalizers import Context, ExpositionParser, Normalized, Normalizer, Options, load_profiles
from pool_registry import Registry
from tests.conftest import REPO

FIXTURES = REPO / "tests" / "fixtures" / "exposition"
T0 = 1_795_000_000_000  # 2026-11-18T...Z, the injected "now" and default timestamp
PROFILES = load_profiles()


def normalize(text: str | bytes, *, pool: str | None = "p", node: str | None = None, profile: str | None = None,
              registry: Registry | None = None, chunks: int = 1) -> tuple[Normalized, int]:
    """Parse and normalize; return everything merged and the number of reads, checking the accounting."""
    data = text.encode() if isinstance(text, str) else text
    ctx = Context(PROFILES, PROFILES.get(profile) if profile else None, registry.pools if registry else (), pool, node)
    n = Normalizer(ctx, Options(default_ts_ms=T0, now_ms=T0))
    parser = ExpositionParser()
    step = max(1, len(data) // chunks + 1)
    fed = (parser.feed(data[i:i + step]) for i in range(0, len(data), step))
    outs, reads, raw_rejects = [], 0, []
    for b in whole_scrapes(fed, parser.finish, T0):  # as every source cuts its batches
        reads += b.reads
        raw_rejects.append(b.rejects)
        if b.samples.height:
            outs.append(n.normalize(b))
    merged = Normalized(
        pl.concat([o.samples for o in outs]), pl.concat([*raw_rejects, *(o.rejects for o in outs)]),
        pl.concat([o.versions for o in outs]), sum(o.folded for o in outs), pl.concat([o.state for o in outs]),
        sum(o.ignored for o in outs))
    assert reads == int(merged.samples["n_src"].sum() or 0) + merged.rejects.height + merged.folded + merged.ignored
    return merged, reads


def value(out: Normalized, metric: str, device: str = "0", **attrs: str) -> float:
    rows = out.samples.filter((pl.col("metric") == metric) & (pl.col("device") == device)
                              & (pl.col("attributes") == json.dumps(attrs, sort_keys=True, separators=(",", ":"))))
    assert rows.height == 1, (metric, attrs, out.samples)
    return float(rows["value"][0])


def reasons(out: Normalized) -> list[str]:
    return out.rejects["reason"].to_list()


def test_dcgm_units_derived_total_and_sticky_xid() -> None:
    out, reads = normalize((FIXTURES / "dcgm_memory_xid.prom").read_text())
    assert reads == 7 and out.rejects.height == 0
    assert value(out, "accelerator.memory.used") == 1024 * 2**20 == 1073741824
    assert value(out, "accelerator.memory.total") == (1024 + 79944 + 591) * 2**20 == 85520809984
    assert value(out, "accelerator.utilization") == pytest.approx(0.73)
    assert value(out, "accelerator.clock", clock="sm") == 1.98e9
    assert value(out, "accelerator.energy") == pytest.approx(7312.5)
    total = out.samples.filter(pl.col("metric") == "accelerator.memory.total")
    used = out.samples.filter(pl.col("metric") == "accelerator.memory.used")
    assert (total["n_src"][0], used["n_src"][0]) == (2, 1)  # FREE and RESERVED fold into the total row
    assert value(out, "accelerator.errors", code="48", error_class="memory_uncorrectable", severity="fatal") == 1
    assert set(out.samples["node"]) == {"h100-a-001"} and set(out.samples["ts"]) == {T0}
    assert out.versions.unique().rows() == [("p", "h100-a-001", "", "driver", "550.144.03", T0)]


def test_gaudi_milliwatts_and_impossible_utilization() -> None:
    out, _ = normalize((FIXTURES / "gaudi.prom").read_text())
    assert value(out, "accelerator.power") == 350.0
    assert value(out, "accelerator.power", device="1") == 412.5
    assert value(out, "accelerator.utilization") == pytest.approx(0.87)
    assert value(out, "accelerator.memory.total") == 137438953472
    assert value(out, "accelerator.clock", clock="soc") == 1.6e9
    assert value(out, "accelerator.errors", code="pcie_replay", error_class="interconnect",
                 severity="informational") == 3  # an error counter's first sample: all its events so far
    assert "value 140.0 is above the valid maximum 100.0 of habanalabs_utilization" in reasons(out)
    assert "metric 'habanalabs_pci_link_width' is not mapped by profile 'gaudi'" in reasons(out)
    versions = set(out.versions.select("device", "component", "version").rows())
    assert versions == {("", "driver", "1.22.1-97ec1a4"), ("0", "firmware", "1.22.1-fw-57.1.0-sec-9"),
                        ("1", "firmware", "1.22.1-fw-57.1.0-sec-9"), ("0", "firmware_fit", "1.22.1-fw-57.1.0"),
                        ("1", "firmware_fit", "1.22.1-fw-57.1.0")}


def test_ascend_mib_health_error_codes_and_second_timestamps() -> None:
    labels = 'id="0",model_name="910B3",vdie_id="",pcie_bus_info=""'
    text = (f"npu_chip_info_hbm_total_memory{{{labels}}} 65536 1723621883587\n"
            f"npu_chip_info_health_status{{{labels}}} -1 1723621883587\n"
            f"npu_chip_info_error_code{{{labels}}} 2162169857 1606402000\n"
            f"npu_chip_info_error_code_1{{{labels}}} 4294967295 1606402000\n")
    out, _ = normalize(text, node="ascend-a-001")
    assert value(out, "accelerator.memory.total") == 64 * 2**30 == 68719476736
    assert reasons(out) == ["health unknown (DCMI call failed) (value -1)"]
    events = out.samples.filter(pl.col("metric") == "accelerator.errors").sort("attributes")
    assert events["attributes"].to_list() == [
        '{"code":"80E01801","error_class":"application","severity":"recoverable"}',
        '{"code":"FFFFFFFF","error_class":"unknown","severity":"recoverable"}']
    assert set(events["ts"]) == {1606402000000}


def test_histogram_buckets_sum_and_count_in_seconds() -> None:
    text = ("# TYPE nv_inference_first_response_histogram_ms histogram\n"
            'nv_inference_first_response_histogram_ms_bucket{model="m",version="1",le="100"} 3\n'
            'nv_inference_first_response_histogram_ms_bucket{model="m",version="1",le="250"} 7\n'
            'nv_inference_first_response_histogram_ms_bucket{model="m",version="1",le="+Inf"} 9\n'
            'nv_inference_first_response_histogram_ms_sum{model="m",version="1"} 1500\n'
            'nv_inference_first_response_histogram_ms_count{model="m",version="1"} 9\n')
    out, _ = normalize(text, node="n1")
    ttft = "serving.time_to_first_token"
    base = {"model": "m", "model_version": "1"}
    assert value(out, ttft, device="", stat="bucket", le="0.1", **base) == 3
    assert value(out, ttft, device="", stat="bucket", le="0.25", **base) == 7
    assert value(out, ttft, device="", stat="bucket", le="+Inf", **base) == 9
    assert value(out, ttft, device="", stat="sum", **base) == 1.5
    assert value(out, ttft, device="", stat="count", **base) == 9


def test_serving_names_outcomes_and_companions() -> None:
    text = ('vllm:request_success_total{finished_reason="stop",model_name="llama"} 5\n'
            'vllm:request_success_total{finished_reason="abort",model_name="llama"} 2\n'
            'vllm:request_success_created{finished_reason="stop",model_name="llama"} 1.7e9\n'
            'vllm:num_requests_running{model_name="llama",engine="0"} 8\n'
            'sglang:num_requests_total{model_name="q"} 11\n')
    out, _ = normalize(text, node="n1")
    assert value(out, "serving.requests", device="", model="llama", outcome="ok", reason="stop") == 5
    assert value(out, "serving.requests", device="", model="llama", outcome="abort", reason="abort") == 2
    assert value(out, "serving.requests.running", device="", model="llama", engine="0") == 8
    assert value(out, "serving.requests", device="", model="q", outcome="all") == 11
    assert reasons(out) == ["'vllm:request_success_created' is the creation time of counter "
                            "'vllm:request_success', not a sample"]


def test_prefix_cache_hit_ratio_from_vllm_counters_and_sglang_rate() -> None:
    # vLLM counts tokens: 300 of the 1,200 prompt tokens it looked up were cached, a ratio of 0.25
    text = ('vllm:prefix_cache_hits_total{model_name="llama",engine="0"} 300\n'
            'vllm:prefix_cache_queries_total{model_name="llama",engine="0"} 1200\n'
            'vllm:prefix_cache_hits_created{model_name="llama",engine="0"} 1.7e9\n'
            'sglang:cache_hit_rate{model_name="q"} 0.4\n')
    out, reads = normalize(text, node="n1")
    assert value(out, "serving.prefix_cache.hit_ratio", device="", model="llama", engine="0") == 0.25
    assert value(out, "serving.prefix_cache.hit_ratio", device="", model="q") == 0.4
    assert (reads, out.ignored, out.rejects.height) == (4, 1, 0)


@pytest.mark.parametrize(("text", "reason"), [
    # nothing looked up yet: 0 / 0 is no ratio, and a sample never becomes a number it is not
    ('vllm:prefix_cache_hits_total{model_name="m"} 0\nvllm:prefix_cache_queries_total{model_name="m"} 0\n',
     "serving.prefix_cache.hit_ratio is a ratio over vllm:prefix_cache_queries_total = 0: no value yet"),
    ('vllm:prefix_cache_hits_total{model_name="m"} 3\n',
     "vllm:prefix_cache_hits_total feeds only serving.prefix_cache.hit_ratio, which also needs "
     "vllm:prefix_cache_queries_total at the same time"),
    ('sglang:cache_hit_rate{model_name="q"} 1.5\n',
     "value 1.5 is above the valid maximum 1.0 of sglang:cache_hit_rate"),
])
def test_a_hit_ratio_without_a_value_is_rejected(text: str, reason: str) -> None:
    out, _ = normalize(text, node="n1")
    assert out.samples.filter(pl.col("metric") == "serving.prefix_cache.hit_ratio").height == 0
    assert set(reasons(out)) == {reason}


BAD_VALUES = [
    ('DCGM_FI_DEV_MEMORY_TEMP{gpu="0",Hostname="n"} 9223372036854775794', "DCGM blank value (no data)"),
    ('DCGM_FI_DEV_GPU_UTIL{gpu="0",Hostname="n"} NaN', "value is NaN"),
    ('DCGM_FI_DEV_GPU_UTIL{gpu="0",Hostname="n"} -3', "value -3.0 is below the valid minimum 0.0"),
    ('DCGM_FI_DEV_POWER_USAGE{gpu="0",Hostname="n"} +Inf', "value is +Inf"),
    ('DCGM_FI_DEV_GPU_UTIL{gpu="0",Hostname="n"} 5 2100000000000', "is more than a day ahead of now"),
    ('DCGM_FI_DEV_GPU_UTIL{gpu="0",Hostname="n"} 5 -1000', "negative timestamp -1000000"),
    ('DCGM_FI_DEV_GPU_UTIL{gpu="0"} 5', "no node: no label among Hostname, hostname is set"),
    ('DCGM_FI_DEV_VGPU_LICENSE_STATUS{gpu="0",Hostname="n"} 1',
     "metric 'DCGM_FI_DEV_VGPU_LICENSE_STATUS' is not mapped by profile 'dcgm'"),
    ("furiosa_npu_alive 1", "no profile knows metric 'furiosa_npu_alive'"),
]


@pytest.mark.parametrize("line, reason", BAD_VALUES)
def test_impossible_values_are_rejected_with_a_reason(line: str, reason: str) -> None:
    out, _ = normalize(line + "\n")
    assert out.samples.height == 0
    assert len(reasons(out)) == 1 and reason in reasons(out)[0], reasons(out)


def test_duplicate_series_in_one_scrape() -> None:
    text = 'DCGM_FI_DEV_GPU_UTIL{gpu="0",Hostname="n"} 5\nDCGM_FI_DEV_GPU_UTIL{Hostname="n", gpu="0"} 6\n'
    out, _ = normalize(text)
    assert value(out, "accelerator.utilization") == 0.05
    assert reasons(out) == ["duplicate series in one scrape: same series and timestamp as an earlier line"]


def test_pools_from_the_registry_rules(fleet: Registry) -> None:
    text = ('DCGM_FI_DEV_GPU_UTIL{gpu="0",Hostname="h100-a-003"} 5\n'
            'DCGM_FI_DEV_GPU_UTIL{gpu="0",Hostname="somewhere-else"} 5\n'
            'gpu_gfx_activity{gpu_id="0",hostname="mi300x-a-002"} 50\n')
    out, _ = normalize(text, pool=None, registry=fleet)
    assert sorted(out.samples.select("pool", "node").rows()) == [("h100-a", "h100-a-003"),
                                                                   ("mi300x-a", "mi300x-a-002")]
    assert reasons(out) == ["no pool matches node 'somewhere-else'"]


def test_forced_profile_and_node_option() -> None:
    out, _ = normalize("gpu_gfx_activity 50\n", profile="dcgm", node="n1")
    assert reasons(out) == ["metric 'gpu_gfx_activity' is not mapped by profile 'dcgm'"]
    out, _ = normalize('gpu_gfx_activity{gpu_id="3"} 50\n', node="n1")
    assert out.samples.select("node", "device", "value").rows() == [("n1", "3", 0.5)]


def test_mig_instances_stay_apart() -> None:
    labels = 'gpu="0",GPU_I_ID="{i}",GPU_I_PROFILE="1g.10gb",Hostname="n"'
    text = "".join(f"DCGM_FI_PROF_GR_ENGINE_ACTIVE{{{labels.format(i=i)}}} 0.{i}\n" for i in (7, 8))
    out, _ = normalize(text)
    assert value(out, "accelerator.utilization", engine="graphics", mig_instance="8", mig_profile="1g.10gb") == 0.8


def test_derived_total_across_chunks_and_when_a_part_is_missing() -> None:
    scrape = (FIXTURES / "dcgm_memory_xid.prom").read_text()
    for chunks in (1, 3, 7, 40):
        out, _ = normalize(scrape, chunks=chunks)
        assert value(out, "accelerator.memory.total") == 85520809984, chunks
    no_reserved = "\n".join(ln for ln in scrape.splitlines() if "FB_RESERVED" not in ln) + "\n"
    out, _ = normalize(no_reserved)
    assert reasons(out) == ["DCGM_FI_DEV_FB_FREE feeds only accelerator.memory.total, which also needs "
                            "DCGM_FI_DEV_FB_RESERVED at the same time"]

