"""File ingest end to end into a real DuckDB file: the corpus, bad inputs, idempotency, atomicity, state."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import duckdb
import polars as pl
import pytest

from collectors.exceptions import CollectorError
from collectors.files import read_chunks
from collectors.pipeline import IngestOptions, IngestReport, clock_options, ingest_exposition
from store import Held, connect
from tests.test_exposition import exposition_files
from tests.test_normalize import FIXTURES

NOW = 1_795_000_000.0  # seconds; the injected clock of every run here
AT = 1_794_990_000_000


def ingest(con: duckdb.DuckDBPyConnection, path: Path, chunk: int = 1 << 20, **options: object) -> IngestReport:
    opts = IngestOptions(**{"pool": "p", "at_ms": AT, **options})  # type: ignore[arg-type]
    report = ingest_exposition(Held(con), read_chunks(path, chunk), kind="file", source=str(path), options=opts,
                               clock=lambda: NOW)
    c = report.counts
    assert c.read == c.stored + c.rejected + c.duplicates + c.ignored
    return report


def state(con: duckdb.DuckDBPyConnection) -> dict[str, list[tuple[object, ...]]]:
    """Everything an ingest may write, as plain rows."""
    tables = ("samples", "rejects", "versions", "error_state", "rollup_1m", "rollup_1h")
    out = {t: sorted(con.execute(f"SELECT * FROM {t}").fetchall(), key=repr) for t in tables}
    out["ingest_runs"] = con.execute("SELECT run_id, status FROM ingest_runs ORDER BY run_id").fetchall()
    return out


def one(con: duckdb.DuckDBPyConnection, sql: str, params: list[object]) -> object:
    rows = con.execute(sql, params).fetchall()
    assert len(rows) == 1, rows
    return rows[0][0]


def test_every_corpus_sample_ingests(con: duckdb.DuckDBPyConnection, corpus: Path) -> None:
    stored, ignored = {}, {}
    for path in exposition_files(corpus):
        # each file on a node of its own (where it names none), so that equal series of two files stay apart
        node = f"{path.parent.name}-{path.stem}"
        counts = ingest(con, path, node=node).counts
        stored[node] = counts.stored
        if counts.ignored:
            ignored[node] = counts.ignored
    assert stored == {"amd-real_world_exposition_samples": 6,
                      "ascend-npu-exporter-collector_testdata_prometheus_metrics": 88,
                      "ascend-npu-exporter-collector_testdata_prometheus_metrics2": 0,
                      "mind-cluster-collector_testdata_prometheus_metrics": 88,
                      "mind-cluster-collector_testdata_prometheus_metrics2": 0,
                      "mind-cluster-docs_example_exposition": 9,
                      "dcgm-real_world_exposition_samples": 15,
                      "furiosa-readme_exposition_example": 0,   # no shipped profile: every sample rejected
                      "sglang-docs_references_production_metrics_example": 68,
                      "triton-tensorrtllm_backend_readme_metrics_example": 1,
                      "triton-triton_docs_summary_example": 1,
                      # the docs' TTFT histogram is elided (no +Inf bucket): rejected whole, with the reason
                      "vllm-real_world_exposition_samples": 11}
    # the metrics each shipped profile's `ignore` names: known, deliberately not mapped, neither stored nor rejected
    assert ignored == {"amd-real_world_exposition_samples": 3,
                       "ascend-npu-exporter-collector_testdata_prometheus_metrics": 18,
                       "ascend-npu-exporter-collector_testdata_prometheus_metrics2": 2,
                       "mind-cluster-collector_testdata_prometheus_metrics": 18,
                       "mind-cluster-collector_testdata_prometheus_metrics2": 2,
                       "mind-cluster-docs_example_exposition": 2,
                       "dcgm-real_world_exposition_samples": 2,
                       "sglang-docs_references_production_metrics_example": 23,
                       "triton-tensorrtllm_backend_readme_metrics_example": 8,
                       "triton-triton_docs_summary_example": 8,
                       "vllm-real_world_exposition_samples": 8}
    assert con.execute("SELECT count(*) FROM rejects WHERE reason LIKE '%gpu_free_vram%' OR reason LIKE "
                       "'%sglang:func_latency%' OR reason LIKE '%machine_card_nums%'").fetchall() == [(0,)]

    def val(metric: str, node: str, device: str = "", **attrs: str) -> object:
        return one(con, "SELECT value FROM samples WHERE metric = ? AND node = ? AND device = ? AND attributes = ?",
                   [metric, node, device, json.dumps(attrs, sort_keys=True, separators=(",", ":"))])

    a30 = "yg-data-k8s-gpu-a30-node-test-test0003.mt"
    assert val("accelerator.power", a30, "0", mig_instance="3", mig_profile="1g.6gb") == 52.636
    assert val("accelerator.utilization", "dcgm-exporter-wwwjh", "1", engine="decoder") == 0.46
    doc = "mind-cluster-docs_example_exposition"
    assert val("accelerator.clock", doc, "0", clock="aicore") == 1e9  # 1000 MHz in the Ascend doc example
    assert one(con, "SELECT ts FROM samples WHERE metric = 'accelerator.clock' AND node = ? AND device = '0'",
               [doc]) == 1723621883587
    fixture = "mind-cluster-collector_testdata_prometheus_metrics"
    assert one(con, "SELECT min(ts) FROM samples WHERE node = ?", [fixture]) == 1606402000 * 1000
    assert val("accelerator.clock", "xxxx", "0", clock="system", clock_index="2", partition="0") == 132e6
    vllm, sglang = "vllm-real_world_exposition_samples", "sglang-docs_references_production_metrics_example"
    llama = "meta-llama/Llama-3.1-8B-Instruct"
    assert val("serving.kv_cache.usage", vllm, engine="0", model="zai-org/GLM-4.5") == 9.75010481363281e-06
    # the vLLM docs' TTFT histogram (8 buckets and _count, no +Inf) and a _count of it without buckets
    assert con.execute("SELECT count(*) FROM rejects WHERE reason LIKE 'invalid histogram: no le=\"+Inf\" bucket%'"
                       ).fetchall() == [(10,)]
    assert val("serving.tokens.prompt", sglang, model=llama) == 8128902
    assert val("serving.prefix_cache.hit_ratio", sglang, model=llama) == 0.007507552643049313
    # the vLLM sample has the prefix-cache queries but not the hits (0.9's name): no ratio, and the reason says why
    assert con.execute("SELECT count(*) FROM rejects WHERE reason = 'vllm:prefix_cache_queries_total feeds only "
                       "serving.prefix_cache.hit_ratio, which also needs vllm:prefix_cache_hits_total at the same "
                       "time'").fetchall() == [(1,)]
    assert val("serving.time_to_first_token", sglang, model=llama, stat="sum") == 2.3518979474117756e+06
    assert val("serving.requests", "triton-triton_docs_summary_example", model="my_model", model_version="1",
               outcome="ok") == 161
    reasons = dict(con.execute("SELECT reason, count(*) FROM rejects GROUP BY reason").fetchall())
    assert reasons["DCGM blank value (no data) (value 9.223372036854776e+18)"] == 1
    assert reasons["bad metric name: '...' does not start with [a-zA-Z_:]"] == 2
    assert any(r.startswith("no profile knows metric 'furiosa_npu_alive'") for r in reasons)
    lines = con.execute("SELECT line FROM rejects WHERE reason LIKE 'bad metric name%' ORDER BY line").fetchall()
    assert lines == [(2,), (23,)]


def write(tmp_path: Path, name: str, data: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


GPU = 'DCGM_FI_DEV_GPU_UTIL{gpu="0",Hostname="h1"}'
BAD_INPUTS: list[tuple[str, bytes, str]] = [
    ("truncated label value", b'DCGM_FI_DEV_GPU_UTIL{gpu="0",Hostname="h1', "unterminated value of label 'Hostname'"),
    ("truncated after labels", b'DCGM_FI_DEV_GPU_UTIL{gpu="0"', "unterminated label set: no closing '}'"),
    ("truncated before value", GPU.encode(), "missing value after 'DCGM_FI_DEV_GPU_UTIL'"),
    ("negative counter", b'# TYPE vllm:prompt_tokens counter\n'
     b'vllm:prompt_tokens_total{model_name="m",hostname="h1"} -5',
     "counter value is -5, negative"),
    ("histogram without +Inf", b'# TYPE vllm:e2e_request_latency_seconds histogram\n'
     b'vllm:e2e_request_latency_seconds_bucket{le="1",model_name="m",hostname="h1"} 3',
     'invalid histogram: no le="+Inf" bucket'),
    ("duplicate label", b'DCGM_FI_DEV_GPU_UTIL{gpu="0",gpu="1",Hostname="h1"} 5', "duplicate label 'gpu'"),
    ("missing comma", b'DCGM_FI_DEV_GPU_UTIL{gpu="0" Hostname="h1"} 5', "expected ',' or '}' after the value"),
    ("unquoted label value", b"DCGM_FI_DEV_GPU_UTIL{gpu=0} 5", "expected '\"' to open the value of label 'gpu'"),
    ("bad label name", b'DCGM_FI_DEV_GPU_UTIL{0gpu="0"} 5', "bad label name at column 22"),
    ("bad metric name", b"0DCGM 5", "bad metric name"),
    ("doc ellipsis", b"...", "bad metric name: '...' does not start with [a-zA-Z_:]"),
    ("bad value", GPU.encode() + b" fast", "bad value 'fast'"),
    ("hex value", GPU.encode() + b" 0x10", "bad value '0x10'"),
    ("bad timestamp", GPU.encode() + b" 5 yesterday", "bad timestamp 'yesterday'"),
    ("extra field", GPU.encode() + b" 5 1723621883587 9", "unexpected text after the timestamp"),
    ("timestamp 10 years ahead", GPU.encode() + b" 5 2110000000000", "is more than a day ahead of now"),
    ("negative timestamp", GPU.encode() + b" 5 -1723621883587", "negative timestamp -1723621883587"),
    ("NaN", GPU.encode() + b" NaN", "value is NaN"),
    ("negative utilization", GPU.encode() + b" -1", "value -1.0 is below the valid minimum 0.0"),
    ("140 % utilization", GPU.encode() + b" 140", "value 140.0 is above the valid maximum 100.0"),
    ("DCGM blank", b'DCGM_FI_DEV_MEMORY_TEMP{gpu="0",Hostname="h1"} 9223372036854775794',
     "DCGM blank value (no data)"),
    ("Ascend unknown health", b'npu_chip_info_health_status{id="0",hostname="h1"} -1 1723621883587',
     "health unknown (DCMI call failed) (value -1)"),
    ("health out of range", b'gpu_health{gpu_id="0",hostname="h1"} 2', "value 2.0 is not one of 1, 0 for gpu_health"),
    ("duplicate series in one scrape", GPU.encode() + b" 5\n" + GPU.replace(",", ", ").encode() + b" 6",
     "duplicate series in one scrape"),
    ("unmapped metric", b'DCGM_FI_DEV_VGPU_LICENSE_STATUS{gpu="0",Hostname="h1"} 1',
     "metric 'DCGM_FI_DEV_VGPU_LICENSE_STATUS' is not mapped by profile 'dcgm'"),
    ("unknown dialect", b"some_other_exporter_metric 1",
     "no profile knows metric 'some_other_exporter_metric'"),
    ("no node", b'DCGM_FI_DEV_GPU_UTIL{gpu="0"} 5', "no node: no label among Hostname, hostname is set"),
    ("counter creation time", b'vllm:prompt_tokens_created{model_name="m",hostname="h1"} 1.7e9',
     "'vllm:prompt_tokens_created' is the creation time of counter 'vllm:prompt_tokens'"),
    ("histogram bucket without le", b'vllm:e2e_request_latency_seconds_bucket{hostname="h1"} 3',
     "has a missing or bad le None"),
    ("lone derived input", b'DCGM_FI_DEV_FB_FREE{gpu="0",Hostname="h1"} 100',
     "DCGM_FI_DEV_FB_FREE feeds only accelerator.memory.total, which also needs DCGM_FI_DEV_FB_USED"),
    ("binary garbage", bytes(random.Random(3).randrange(128, 256) for _ in range(300)), "not UTF-8 text"),
    ("control characters", b"\x00\x01\x02 5", "bad metric name"),
    ("10 MB single line", b"m " + b"9" * (10 << 20), "line longer than 1048576 bytes"),
]


@pytest.mark.parametrize("name, data, reason", BAD_INPUTS, ids=[b[0] for b in BAD_INPUTS])
def test_bad_inputs_are_rejected_with_their_reason(con: duckdb.DuckDBPyConnection, tmp_path: Path, name: str,
                                                   data: bytes, reason: str) -> None:
    good = b'DCGM_FI_DEV_GPU_UTIL{gpu="7",Hostname="h1"} 50\n'
    report = ingest(con, write(tmp_path, "bad.prom", good + data + b"\n" + good.replace(b'"7"', b'"6"')))
    got = con.execute("SELECT line, reason FROM rejects").fetchall()
    assert any(reason in r for _, r in got), got
    around = con.execute("SELECT device FROM samples WHERE device IN ('6', '7') ORDER BY device").fetchall()
    assert around == [("6",), ("7",)]  # the good lines around the bad one are stored anyway
    assert report.counts.rejected >= 1
    assert all(line is not None and line >= 2 for line, _ in got)


def test_empty_and_comment_only_files(con: duckdb.DuckDBPyConnection, tmp_path: Path) -> None:
    for data in (b"", b"# HELP x y\n# TYPE x gauge\n\n"):
        report = ingest(con, write(tmp_path, "empty.prom", data))
        assert report.as_dict() == {"read": 0, "stored": 0, "rejected": 0, "duplicates": 0, "ignored": 0}
        assert report.warnings == [f"{tmp_path / 'empty.prom'}: no samples (empty input, or only comments)"]


def test_reingest_stores_nothing_new(con: duckdb.DuckDBPyConnection, corpus: Path) -> None:
    path = corpus / "ascend" / "mind-cluster" / "docs_example_exposition.prom"  # timestamped samples
    first = ingest(con, path, node="n1")
    second = ingest(con, path, node="n1")
    assert first.counts.stored == 9 and second.counts.stored == 0
    assert second.counts.duplicates == first.counts.stored + first.counts.duplicates
    fixture = FIXTURES / "dcgm_memory_xid.prom"  # no timestamps: --at makes re-ingest idempotent
    before = ingest(con, fixture).counts.stored
    again = ingest(con, fixture)
    assert before == 7 and again.counts.stored == 0 and again.counts.duplicates == 7


def test_reingest_counts_its_rejects_but_keeps_them_once(con: duckdb.DuckDBPyConnection, tmp_path: Path) -> None:
    path = write(tmp_path, "bad.prom", b'DCGM_FI_DEV_GPU_UTIL{gpu="0",Hostname="h100-a-001"} 140\nnot a line\n')
    first, second = ingest(con, path), ingest(con, path)
    assert first.counts.rejected == second.counts.rejected == 2  # every run accounts for what it read
    kept = con.execute("SELECT run_id, line FROM rejects ORDER BY line").fetchall()
    assert kept == [(first.run_id, 1), (first.run_id, 2)]
    other = write(tmp_path, "other.prom", path.read_bytes())  # another source keeps its own
    ingest(con, other)
    assert con.execute("SELECT count(*) FROM rejects").fetchall() == [(4,)]


def big_file(tmp_path: Path, scrapes: int = 40) -> Path:
    lines = []
    for s in range(scrapes):
        ts = AT + s * 15_000
        for g in range(8):
            labels = f'gpu="{g}",Hostname="h100-a-001"'
            lines += [f"DCGM_FI_DEV_GPU_UTIL{{{labels}}} {(s + g) % 100} {ts}",
                      f"DCGM_FI_DEV_FB_USED{{{labels}}} {1000 + s} {ts}",
                      f"DCGM_FI_DEV_FB_FREE{{{labels}}} {2000 - s} {ts}",
                      f"DCGM_FI_DEV_FB_RESERVED{{{labels}}} 591 {ts}",
                      f"DCGM_FI_DEV_XID_ERRORS{{{labels}}} {48 if s >= 20 and g == 3 else 0} {ts}"]
    return write(tmp_path, "big.prom", ("\n".join(lines) + "\n").encode())


def test_a_failure_mid_file_leaves_the_store_as_it_was(con: duckdb.DuckDBPyConnection, tmp_path: Path) -> None:
    ingest(con, FIXTURES / "dcgm_memory_xid.prom")
    before = state(con)
    path = big_file(tmp_path)
    calls = []

    def boom(n: int) -> None:
        calls.append(n)
        # staged, not written: the store shows nothing of the run until its commit
        assert con.execute("SELECT count(*) FROM samples").fetchall()[0][0] == before_rows
        if n == 3:
            raise OSError("disk full (injected)")

    before_rows = len(before["samples"])
    with pytest.raises(OSError, match="injected"):
        ingest_exposition(Held(con), read_chunks(path, 4096), kind="file", source=str(path),
                          options=IngestOptions(pool="p"), clock=lambda: NOW, after_batch=boom)
    assert calls == [1, 2, 3]
    assert state(con) == before
    report = ingest(con, path, chunk=4096)  # the same file then goes in whole
    assert report.counts.read == 40 * 8 * 5 and report.counts.rejected == 0


def test_chunking_does_not_change_what_is_stored(tmp_path: Path) -> None:
    path = big_file(tmp_path)
    results = []
    for chunk in (997, 4096, 1 << 20):
        c = connect(tmp_path / f"c{chunk}.duckdb")
        report = ingest(c, path, chunk=chunk)
        results.append((report.as_dict(), c.execute(
            "SELECT ts, node, device, metric, value, attributes FROM samples ORDER BY ALL").fetchall()))
        c.close()
    assert results[0] == results[1] == results[2]
    counts, rows = results[0]
    # 319 = 320 XIDs - 1 event
    assert counts == {"read": 1600, "stored": 1281, "rejected": 0, "duplicates": 319, "ignored": 0}
    assert sum(1 for r in rows if r[3] == "accelerator.memory.total") == 320


def test_sticky_xid_across_five_runs_is_one_event(con: duckdb.DuckDBPyConnection, tmp_path: Path) -> None:
    line = 'DCGM_FI_DEV_XID_ERRORS{gpu="2",Hostname="h100-a-001",err_code="79"} 79\n'
    path = write(tmp_path, "xid.prom", line.encode())
    reports = [ingest(con, path, at_ms=AT + i * 15_000) for i in range(5)]
    assert [r.counts.stored for r in reports] == [1, 0, 0, 0, 0]
    assert [r.counts.duplicates for r in reports] == [0, 1, 1, 1, 1]
    rows = con.execute("SELECT ts, value, attributes FROM samples WHERE metric = 'accelerator.errors'").fetchall()
    assert rows == [(AT, 1.0, '{"code":"79","error_class":"device_lost","severity":"fatal"}')]
    cleared = write(tmp_path, "clear.prom", line.replace("79", "0").encode())
    ingest(con, cleared, at_ms=AT + 100_000)
    ingest(con, path, at_ms=AT + 200_000)
    assert one(con, "SELECT sum(value) FROM samples WHERE metric = 'accelerator.errors'", []) == 2


ENFLAME_PROFILE = """\
# Enflame gcu-exporter: written as data only, no code change.
profile: enflame
vendor: enflame
detect: [enflame_gcu_]
node_labels: [host]
device_labels: [minor_number, uuid]
metrics:
  enflame_gcu_usage: {metric: accelerator.utilization, unit: percent, min: 0, max: 100,
                      reject_values: {-1: "not supported by the device"}}
  enflame_gcu_memory_used_bytes: {metric: accelerator.memory.used, unit: bytes, min: 0}
  enflame_gcu_power_usage: {metric: accelerator.power, unit: W, min: 0, reject_values: {-1: "not supported"}}
  enflame_gcu_temperatures: {metric: accelerator.temperature, unit: celsius, reject_values: {-1: "not supported"}}
  enflame_gcu_health:
    metric: accelerator.health
    unit: bool
    reject_values: {0: "health unknown"}
    values: {2: 1, 1: 0}
"""


def test_a_new_vendor_is_a_profile_file(con: duckdb.DuckDBPyConnection, tmp_path: Path, corpus: Path) -> None:
    names = (corpus / "other" / "enflame" / "enflame_gcu_metric_names_extracted.tsv").read_text()
    assert "enflame_gcu_usage\tgauge" in names and "enflame_gcu_health\tgauge" in names
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    (profiles / "enflame.yaml").write_text(ENFLAME_PROFILE)
    labels = 'host="enf-001",minor_number="{d}",uuid="GCU-{d}",busid="0000:3{d}:00.0",slot="{d}",name="S60"'
    text = "".join([
        f"enflame_gcu_usage{{{labels.format(d=0)}}} 61.5\n",
        f"enflame_gcu_usage{{{labels.format(d=1)}}} -1\n",
        f"enflame_gcu_power_usage{{{labels.format(d=0)}}} 175.2\n",
        f"enflame_gcu_health{{{labels.format(d=0)}}} 2\n",
        f"enflame_gcu_health{{{labels.format(d=1)}}} 1\n",
        f"enflame_gcu_memory_used_bytes{{{labels.format(d=0)}}} 21474836480\n",
    ])
    without = ingest(con, write(tmp_path, "enflame.prom", text.encode()))
    assert without.counts.stored == 0 and without.counts.rejected == 6
    report = ingest(con, tmp_path / "enflame.prom", profiles_dirs=(profiles,), at_ms=AT + 1)
    assert report.as_dict() == {"read": 6, "stored": 5, "rejected": 1, "duplicates": 0, "ignored": 0}
    rows = con.execute("SELECT node, device, metric, value FROM samples ORDER BY ALL").fetchall()
    assert rows == [("enf-001", "0", "accelerator.health", 1.0),
                    ("enf-001", "0", "accelerator.memory.used", 21474836480.0),
                    ("enf-001", "0", "accelerator.power", 175.2), ("enf-001", "0", "accelerator.utilization", 0.615),
                    ("enf-001", "1", "accelerator.health", 0.0)]
    assert ("not supported by the device (value -1)",) in con.execute("SELECT reason FROM rejects").fetchall()


def test_versions_first_and_last_seen(con: duckdb.DuckDBPyConnection, tmp_path: Path) -> None:
    path = big_file(tmp_path, scrapes=3)
    text = path.read_text().replace('Hostname="h100-a-001"', 'Hostname="h100-a-001",DCGM_FI_DRIVER_VERSION="550.1"')
    ingest(con, write(tmp_path, "v.prom", text.encode()))
    later = re.sub(r" (\d{13})$", lambda m: f" {int(m.group(1)) + 600_000}", text.replace("550.1", "560.2"),
                   flags=re.M)
    ingest(con, write(tmp_path, "w.prom", later.encode()))
    rows = con.execute("SELECT node, device, component, version, first_seen, last_seen FROM versions "
                       "ORDER BY version").fetchall()
    assert rows == [("h100-a-001", "", "driver", "550.1", AT, AT + 30_000),
                    ("h100-a-001", "", "driver", "560.2", AT + 600_000, AT + 630_000)]


def test_rows_frame_of_a_run_matches_the_canonical_schema(con: duckdb.DuckDBPyConnection) -> None:
    ingest(con, FIXTURES / "gaudi.prom")
    frame = con.sql("SELECT * FROM samples").pl()
    assert frame.columns == ["ts", "pool", "node", "device", "metric", "value", "attributes", "device_wide"]
    assert frame.filter(pl.col("metric") == "accelerator.power").sort("device")["value"].to_list() == [350.0, 412.5]


def test_a_timestamp_from_1970_is_rejected_and_the_run_stays_small(con: duckdb.DuckDBPyConnection,
                                                                     tmp_path: Path) -> None:
    # a truncated timestamp once spread one run's rollup refresh over 55 years of empty hours
    path = write(tmp_path, "old.prom", (
        'DCGM_FI_DEV_GPU_UTIL{gpu="0",Hostname="h100-a-001"} 40 1\n'
        f'DCGM_FI_DEV_GPU_UTIL{{gpu="1",Hostname="h100-a-001"}} 50 {AT}\n').encode())
    report = ingest(con, path)
    assert (report.counts.stored, report.counts.rejected) == (1, 1)
    reason = con.execute("SELECT reason FROM rejects").fetchall()[0][0]
    assert reason == ("timestamp 1970-01-01T00:00:01Z is more than 3650 days before now "  # read as seconds
                      "(raise HETPOOL_MAX_SAMPLE_AGE_DAYS to keep older ones)")
    assert con.execute("SELECT min(bucket) FROM rollup_1h").fetchall() == [(AT - AT % 3_600_000,)]


@pytest.mark.parametrize(("raw", "days"), [("", 3650.0), ("30", 30.0), (" 0.5 ", 0.5)])
def test_the_oldest_accepted_sample_comes_from_the_environment(raw: str, days: float) -> None:
    assert clock_options(0, int(NOW * 1000), {"HETPOOL_MAX_SAMPLE_AGE_DAYS": raw}).max_age_ms == int(days * 86_400_000)


@pytest.mark.parametrize("raw", ["ten", "0", "-3", "1e9", "nan"])
def test_a_bad_age_limit_names_the_variable_and_the_value(raw: str) -> None:
    with pytest.raises(CollectorError, match=f"HETPOOL_MAX_SAMPLE_AGE_DAYS='{raw}' is not a number of days"):
        clock_options(0, int(NOW * 1000), {"HETPOOL_MAX_SAMPLE_AGE_DAYS": raw})
