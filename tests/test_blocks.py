"""Prefix blocks in traces: the hash_ids column of every own format, its block size, bad values rejected, and the
blocks kept by the store."""

from __future__ import annotations

import io
import json
from pathlib import Path

import polars as pl
import pytest
from hypothesis import given
from hypothesis import strategies as st

from store import connect
from store.requests import read_requests
from tests.cli import run
from traces import ParseOptions, parse_traffic
from traces.blocks import as_hash_ids, block_sizes, max_blocks, reused_tokens, trace_wide_reuse
from traces.exceptions import TrafficError

OPTS = ParseOptions(block_tokens=16)
T0 = 1_793_577_600_000  # 2026-11-01T00:00:00Z: arrivals are held to the samples' time bounds around now
ROWS = [(T0, 40, 3, [1, 2, 3]), (T0 + 1, 20, 2, [1, 2]), (T0 + 2, 9, 1, None)]  # arrival_ms, in, out, blocks


def _csv() -> bytes:
    lines = ["arrival_ms,in_tokens,out_tokens,hash_ids"]
    lines += [f'{a},{i},{o},"{json.dumps(b)}"' if b is not None else f"{a},{i},{o}," for a, i, o, b in ROWS]
    return "\n".join(lines).encode()


def _jsonl() -> bytes:
    return "\n".join(json.dumps({"arrival_ms": a, "in_tokens": i, "out_tokens": o, "hash_ids": b})
                     for a, i, o, b in ROWS).encode()


def _parquet() -> bytes:
    buf = io.BytesIO()
    pl.DataFrame({"arrival_ms": [r[0] for r in ROWS], "in_tokens": [r[1] for r in ROWS],
                  "out_tokens": [r[2] for r in ROWS], "hash_ids": [r[3] for r in ROWS]},
                 schema_overrides={"hash_ids": pl.List(pl.Int64)}).write_parquet(buf)
    return buf.getvalue()


@pytest.mark.parametrize(("name", "data"), [("t.csv", _csv()), ("t.jsonl", _jsonl()), ("t.parquet", _parquet())])
def test_every_own_format_keeps_the_blocks_with_their_size(name: str, data: bytes) -> None:
    _, parsed = parse_traffic(data, name, options=OPTS)
    assert parsed.rejects.height == 0
    assert parsed.frame["hash_ids"].to_list() == [[1, 2, 3], [1, 2], None]
    # a request without blocks has no block size: its recorded cached_tokens stands
    assert parsed.frame["block_tokens"].to_list() == [16, 16, None]
    assert parsed.frame["cached_tokens"].to_list() == [0, 0, 0]


def test_a_trace_without_blocks_needs_no_block_size() -> None:
    _, parsed = parse_traffic(f"arrival_ms,in_tokens,out_tokens,cached_tokens\n{T0},10,2,4\n".encode(), "t.csv")
    assert parsed.frame.select("cached_tokens", "hash_ids", "block_tokens").rows() == [(4, None, None)]


def test_blocks_without_a_block_size_refuse_the_file() -> None:
    with pytest.raises(TrafficError, match=r"^t\.csv: the trace has hash_ids but no block size: pass the tokens per "
                                           r"prefix block \(--block-tokens\)$"):
        parse_traffic(_csv(), "t.csv")


@pytest.mark.parametrize(("value", "reason"), [
    ('"[1, x]"', "bad hash_ids '[1, x]': expected a list of integers such as [1, 2, 3]"),
    ('"[1, 2.5]"', "bad hash_ids '[1, 2.5]': expected a list of integers such as [1, 2, 3]"),
    ('"[1, 2, 3, 4]"', "hash_ids names 4 blocks of 16 tokens, more than in_tokens 40 fill"),
    ('"1 99999999999999999999"', "bad hash_ids '1 99999999999999999999': expected a list of integers such as "
                                 "[1, 2, 3]"),
])
def test_bad_blocks_reject_their_row(value: str, reason: str) -> None:
    data = f"arrival_ms,in_tokens,out_tokens,hash_ids\n{T0},40,3,{value}\n{T0 + 1},40,3,1 2\n".encode()
    _, parsed = parse_traffic(data, "t.csv", options=OPTS)
    assert parsed.rejects.select("line", "reason").rows() == [(2, reason)]
    assert parsed.frame["hash_ids"].to_list() == [[1, 2]]


def test_mooncake_blocks_beyond_the_prompt_are_rejected() -> None:
    lines = [{"timestamp": 0, "input_length": 513, "output_length": 1, "hash_ids": [1, 2]},
             {"timestamp": 1, "input_length": 512, "output_length": 1, "hash_ids": [1, 2]},
             {"timestamp": 2, "input_length": 512, "output_length": 1, "hash_ids": "1 2"}]
    _, parsed = parse_traffic("\n".join(json.dumps(x) for x in lines).encode(), "m.jsonl", "mooncake")
    assert parsed.rejects["reason"].to_list() == [
        "hash_ids names 2 blocks of 512 tokens, more than in_tokens 512 fill",
        'bad hash_ids "1 2": expected a list of integers']
    assert parsed.frame["hash_ids"].to_list() == [[1, 2]]


@pytest.mark.parametrize(("run_", "block", "tokens", "cached"), [
    (0, 512, 1000, 0), (1, 512, 1000, 512), (2, 512, 1000, 999), (2, 512, 1024, 1023), (1, 16, 1, 0),
    (3, 16, 40, 39)])
def test_reused_tokens_leave_one_prompt_token_to_compute(run_: int, block: int, tokens: int, cached: int) -> None:
    assert reused_tokens(run_, block, tokens) == cached


def test_block_sizes_cover_the_prompt() -> None:
    assert block_sizes(3, 16, 40) == [16, 16, 8]
    assert max_blocks(40, 16) == 3 and max_blocks(48, 16) == 3 and max_blocks(49, 16) == 4


@given(st.lists(st.integers(-(2**63), 2**63 - 1), max_size=20))
def test_hash_ids_text_round_trips(ids: list[int]) -> None:
    assert as_hash_ids(json.dumps(ids)) == ids
    assert as_hash_ids(" ".join(map(str, ids))) == ids
    assert as_hash_ids(ids) == ids


def test_trace_wide_reuse_counts_blocks_sent_before_only() -> None:
    # the third request's blocks were all sent earlier, but its own block 9 breaks the leading run at once
    assert trace_wide_reuse([[1, 2], [1, 2, 3], [9, 1, 2]], [32, 48, 48], 16) == [0, 32, 0]


def test_ingest_stores_the_blocks(capsys: pytest.CaptureFixture[str], db_path: Path, tmp_path: Path) -> None:
    trace = tmp_path / "blocks.csv"
    trace.write_bytes(_csv())
    code, _, err = run(capsys, "--db", str(db_path), "ingest", "traffic", str(trace), "--block-tokens", "16")
    assert code == 0, err
    con = connect(db_path, read_only=True)
    try:
        frame = read_requests(con, trace="blocks.csv")
    finally:
        con.close()
    assert frame.select("hash_ids", "block_tokens").rows() == [([1, 2, 3], 16), ([1, 2], 16), (None, None)]
    code, _, err = run(capsys, "--db", str(db_path), "ingest", "traffic", str(trace), "--block-tokens", "0")
    assert code == 2 and "'0': expected a whole number of tokens per block, at least 1" in err
