"""Fuzz sweep of request traces in every format: Azure CSV, Mooncake JSONL, BurstGPT CSV, hetpool's CSV/JSONL.

Each mutated trace is parsed as its own format and with detection. A parse gives requests and rejects that
add up to the records read, every reject naming its line and reason, or a TrafficError naming the file.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.fuzzing import cases, corpus_files, mutated, repo_files
from traces import parse_traffic
from traces.exceptions import TrafficError

HEAD = 4 << 10  # a few dozen rows of each trace: every case parses a whole file
OWN_JSONL = "\n".join(json.dumps(r) for r in [
    {"arrival_ms": 1764000000000, "in_tokens": 30, "out_tokens": 5, "cached_tokens": 10, "sla_tier": "premium",
     "model": "m", "obs_pool": "p", "obs_ttft_s": 0.2, "obs_e2e_s": 1.5, "outcome": "ok"},
    {"arrival": "2026-11-30T12:00:01.116Z", "in_tokens": 3, "out_tokens": 7},
    {"arrival_ms": 1764000000500, "in_tokens": 2147483648, "out_tokens": 1},
]).encode() + b"\n"
SEEDS = {
    "own.csv": [head[:HEAD] for head in repo_files("examples/traffic/sample.csv")],
    "own.jsonl": [OWN_JSONL],
    "azure.csv": corpus_files("traces/azure_*.csv", limit=HEAD) or [
        b"TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.9799600,4808,10\n"
        b"2023-11-16 18:17:04.0319600,3180,8\n"],
    "mooncake.jsonl": corpus_files("traces/mooncake_*.jsonl", limit=HEAD) or [
        b'{"timestamp": 0, "input_length": 6758, "output_length": 500, "hash_ids": [0, 1, 2]}\n'
        b'{"timestamp": 7, "input_length": 7322, "output_length": 490, "hash_ids": [0, 14]}\n'],
    "burstgpt.csv": repo_files("tests/fixtures/burstgpt_sample.csv"),
}
FORMAT = {"own.csv": "csv", "own.jsonl": "jsonl", "azure.csv": "azure", "mooncake.jsonl": "mooncake",
          "burstgpt.csv": "burstgpt"}
TRACES = st.sampled_from(sorted(SEEDS)).flatmap(lambda name: st.tuples(st.just(name), mutated(SEEDS[name])))


def check(data: bytes, name: str, fmt: str) -> None:
    try:
        _, parsed = parse_traffic(data, name, fmt)
    except TrafficError as exc:
        assert str(exc).startswith(f"{name}: ") and "\n" not in str(exc)
        return
    assert parsed.read == parsed.frame.height + parsed.rejects.height
    assert parsed.rejects.get_column("reason").null_count() == 0
    assert parsed.rejects.get_column("line").null_count() == 0
    frame = parsed.frame
    if frame.height:
        assert frame.get_column("in_tokens").min() >= 0 and frame.get_column("out_tokens").min() >= 0
        assert (frame.get_column("cached_tokens") <= frame.get_column("in_tokens")).all()


@cases(150, path="traffic", sweep=7000)
@given(TRACES)
def test_a_mutated_trace_in_its_own_format(trace: tuple[str, bytes]) -> None:
    name, data = trace
    check(data, name, FORMAT[name])


@cases(75, path="traffic", sweep=3000)
@given(TRACES)
def test_a_mutated_trace_with_detection(trace: tuple[str, bytes]) -> None:
    name, data = trace
    check(data, name, "auto")


def test_a_nan_burstgpt_timestamp_is_a_reject_not_a_crash() -> None:
    data = (b"Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
            b"NaN,ChatGPT,472,18,490,Conversation log\n5,ChatGPT,10,20,30,Conversation log\n")
    _, parsed = parse_traffic(data, "b.csv", "burstgpt")  # once: polars InvalidOperationError casting NaN
    assert parsed.frame.height == 1 and parsed.read == 2
    assert parsed.rejects.rows() == [(2, "NaN,ChatGPT,472,18,490,Conversation log",
                                      "bad Timestamp 'NaN': expected seconds from 0 to 3153600000 from trace start")]


ONCE_CRASHED = [  # (JSONL line, the reject's reason); each once raised ValueError or RecursionError
    ('{"timestamp": ' + "1" * 5000 + ', "input_length": 5, "output_length": 3, "hash_ids": []}',
     "not JSON that can be read (a number of more than 4300 digits)"),
    ('{"timestamp": 0, "input_length": 5, "output_length": 3, "hash_ids": ' + "[" * 100_000 + "}",
     "not JSON that can be read (nested too deeply)"),
]


@pytest.mark.parametrize(("line", "reason"), ONCE_CRASHED, ids=["long-number", "deep"])
@pytest.mark.parametrize("fmt", ["mooncake", "jsonl"])
def test_jsonl_lines_that_once_crashed_are_rejects(line: str, reason: str, fmt: str) -> None:
    good = '{"timestamp": 5, "input_length": 5, "output_length": 3, "hash_ids": [1]}' if fmt == "mooncake" else (
        '{"arrival_ms": 1764000000000, "in_tokens": 5, "out_tokens": 3}')
    _, parsed = parse_traffic(f"{line}\n{good}\n".encode(), "t.jsonl", fmt)
    assert parsed.read == 2 and parsed.frame.height == 1
    assert parsed.rejects.select("line", "reason").rows() == [(1, reason)]
