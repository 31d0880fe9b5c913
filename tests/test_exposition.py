"""The streaming parser: same result whatever the chunking, exact line numbers, rejects with reasons."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from normalizers.exposition import ExpositionParser, RawBatch

SAMPLE = (
    b"# HELP dcgm gpu util\n"
    b"# TYPE DCGM_FI_DEV_GPU_UTIL gauge\n"
    b'DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-1", Hostname="n1"} 40\n'
    b"\n"
    b'DCGM_FI_DEV_GPU_UTIL{gpu="1",UUID="GPU-2",Hostname="n1"} 41 1723621883587\n'
    b"machine_npu_nums 8 1606402000\n"
    b'vllm:e2e_bucket{le="+Inf",model_name="m \\"q\\""} 3\n'
    b"...\n"
    b'm{a="1"} NaN\n'
    b'm{a="2"} +Inf\n'
)


def parse(data: bytes, cuts: list[int] | None = None) -> list[RawBatch]:
    p = ExpositionParser()
    edges = [0, *sorted(cuts or []), len(data)]
    out = [p.feed(data[a:b]) for a, b in itertools.pairwise(edges)]
    return [*out, p.finish()]


def rows(batches: list[RawBatch]) -> list[tuple[object, ...]]:
    """(line, name, labels, value, ts) of every sample, NaN as a string so rows compare."""
    out = []
    for b in batches:
        for line, name, labels, value, ts, _type in b.to_frame().iter_rows():
            v = "nan" if isinstance(value, float) and math.isnan(value) else value
            out.append((line, name, tuple(sorted((d["name"], d["value"]) for d in labels)), v, ts))
    return sorted(out)


def rejects(batches: list[RawBatch]) -> list[tuple[int, str]]:
    return sorted((line, reason) for b in batches for line, _record, reason in b.rejects.iter_rows())


def test_lines_values_timestamps_and_rejects() -> None:
    batches = parse(SAMPLE)
    assert rows(batches) == [
        (3, "DCGM_FI_DEV_GPU_UTIL", (("Hostname", "n1"), ("UUID", "GPU-1"), ("gpu", "0")), 40.0, None),
        (5, "DCGM_FI_DEV_GPU_UTIL", (("Hostname", "n1"), ("UUID", "GPU-2"), ("gpu", "1")), 41.0, 1723621883587),
        (6, "machine_npu_nums", (), 8.0, 1606402000000),
        (7, "vllm:e2e_bucket", (("le", "+Inf"), ("model_name", 'm "q"')), 3.0, None),
        (9, "m", (("a", "1"),), "nan", None),
        (10, "m", (("a", "2"),), math.inf, None),
    ]
    assert rejects(batches) == [(8, "bad metric name: '...' does not start with [a-zA-Z_:]")]
    assert sum(b.reads for b in batches) == 7  # comments and blank lines are not reads
    assert batches[-1].types["DCGM_FI_DEV_GPU_UTIL"] == "gauge"


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=len(SAMPLE)), max_size=8))
def test_any_chunking_gives_the_same_rows(cuts: list[int]) -> None:
    whole = parse(SAMPLE)
    assert rows(parse(SAMPLE, cuts)) == rows(whole)
    assert rejects(parse(SAMPLE, cuts)) == rejects(whole)


def test_last_line_without_newline_and_crlf() -> None:
    batches = parse(b'a{x="1"} 1\r\nb 2\r\n\r\nc 3')
    assert [(r[1], r[3]) for r in rows(batches)] == [("a", 1.0), ("b", 2.0), ("c", 3.0)]


def test_over_long_line_is_rejected_without_stopping() -> None:
    p = ExpositionParser(max_line_bytes=100)
    long = b"x" * 250
    out = [p.feed(b"a 1\n" + long[:120]), p.feed(long[120:] + b" 5\nb 2\n"), p.finish()]
    assert rows(out) == [(1, "a", (), 1.0, None), (3, "b", (), 2.0, None)]
    assert rejects(out) == [(2, "line longer than 100 bytes")]


EOF_TEXT = b"# TYPE a gauge\na 1\n# EOF\nb 2\n# EOF\nc 3\n"


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=len(EOF_TEXT)), max_size=6))
def test_samples_after_eof_are_rejects_in_any_chunking(cuts: list[int]) -> None:
    out = parse(EOF_TEXT, cuts)
    assert [(r[0], r[1]) for r in rows(out)] == [(2, "a")]
    reason = "after '# EOF' at line 3, where the exposition ends"
    assert rejects(out) == [(4, reason), (6, reason)]
    assert sum(b.reads for b in out) == 3


def test_invalid_utf8_rejects_only_its_line() -> None:
    out = parse(b"a 1\nb\xff\xfe 2\nc 3\n")
    assert [r[1] for r in rows(out)] == ["a", "c"]
    assert rejects(out) == [(2, "not UTF-8 text (byte 0xff at column 2)")]


def test_to_frame_schema() -> None:
    frame = parse(b'm{a="1"} 2 3\n')[0].to_frame()
    assert frame.schema == pl.Schema({
        "line": pl.Int64, "name": pl.String,
        "labels": pl.List(pl.Struct({"name": pl.String, "value": pl.String})),
        "value": pl.Float64, "ts_ms": pl.Int64, "type": pl.String})


def exposition_files(corpus: Path) -> list[Path]:
    """Every exposition sample in the corpus: *.prom files and the Ascend exporter's test fixtures."""
    return sorted(p for p in corpus.rglob("*") if p.is_file() and (
        p.suffix == ".prom" or p.name.startswith("collector_testdata_prometheus_metrics")))


def test_corpus_agrees_with_prometheus_client(corpus: Path) -> None:
    """Every line the reference parser accepts, we read identically (names, labels, values)."""
    files = exposition_files(corpus)
    assert len(files) >= 10
    for path in files:
        data = path.read_bytes()
        ours = {(r[1], r[2]): r[3] for r in rows(parse(data))}
        names = {name for name, _ in ours}
        text = "\n".join(line for line in data.decode().splitlines() if line.strip() != "...")
        reference: dict[tuple[str, tuple[tuple[str, str], ...]], object] = {}
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                # the reference parser appends _total to counter samples written without it
                name = s.name[:-6] if s.name not in names and s.name.endswith("_total") else s.name
                reference[(name, tuple(sorted(s.labels.items())))] = "nan" if math.isnan(s.value) else float(s.value)
        assert reference == ours, path.name



ESCAPED = b'm{a="1",b="\\\\"} 5\nm{b="\\\\",a="1"} 6\n'  # one series, its labels in two orders


@pytest.mark.parametrize("cut", range(1, len(ESCAPED)))
def test_a_line_split_after_its_escape_is_keyed_as_when_whole(cut: int) -> None:
    # the part of a line held from the previous chunk must count when choosing the careful parser
    def rows(parts: list[bytes]) -> list[tuple[object, ...]]:
        parser = ExpositionParser()
        batches = [*(parser.feed(p) for p in parts), parser.finish()]
        return [r for b in batches for r in b.samples.select("key", "value").iter_rows()]
    whole = rows([ESCAPED])
    assert whole == [('m{a="1",b="\\\\"}', 5.0), ('m{a="1",b="\\\\"}', 6.0)]
    assert rows([ESCAPED[:cut], ESCAPED[cut:]]) == whole
