"""Traffic adapters: every format parses to the canonical frame, bad rows are rejected with reasons."""

from __future__ import annotations

import datetime as dt
import io
import json
from pathlib import Path

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from traces import FORMATS, ParseOptions, epoch_ms, get_format, parse_traffic, read_traffic
from traces.blocks import trace_wide_reuse
from traces.exceptions import TrafficError, UnknownFormatError

FIXTURES = Path(__file__).parent / "fixtures"
T0 = epoch_ms(dt.datetime(2025, 1, 1, tzinfo=dt.UTC))

B = 1_764_000_000_000  # 2025-11-24: arrivals within the time bounds of now (canonical/timebounds.py)


def test_unknown_format_names_the_known_ones() -> None:
    with pytest.raises(UnknownFormatError) as exc:
        get_format("azur")
    assert str(exc.value) == "unknown traffic format 'azur'; known: azure, burstgpt, csv, jsonl, mooncake, parquet"
    assert sorted(FORMATS) == ["azure", "burstgpt", "csv", "jsonl", "mooncake", "parquet"]


def test_undetectable_file_asks_for_format() -> None:
    with pytest.raises(TrafficError, match=r"x\.txt: cannot tell the traffic format; pass --format"):
        parse_traffic(b"hello\n", "x.txt")


def test_azure_timestamps_are_utc_with_seven_fraction_digits() -> None:
    text = (b"TIMESTAMP,ContextTokens,GeneratedTokens\n"
            b"2023-11-16 18:17:03.9799600,4808,10\n"
            b"2023-11-16 18:17:04.0319600,3180,8\n")
    fmt, parsed = parse_traffic(text, "trace.csv", options=ParseOptions(model="llama", sla_tier="batch"))
    assert fmt == "azure"
    # 2023-11-16T18:17:03Z is 1,700,158,623 s after the epoch; .97996 s truncates to 979 ms.
    assert parsed.frame["arrival_ms"].to_list() == [1_700_158_623_979, 1_700_158_624_031]
    assert parsed.frame.select("in_tokens", "out_tokens", "cached_tokens", "model", "sla_tier").rows() == [
        (4808, 10, 0, "llama", "batch"), (3180, 8, 0, "llama", "batch")]


@pytest.mark.parametrize(("row", "reason"), [
    (b"2023-11-16 18:17:03.1,-5,3", "negative in_tokens -5"),
    (b"yesterday,5,3", "unparseable TIMESTAMP 'yesterday': expected YYYY-MM-DD HH:MM:SS.fffffff"),
    (b"2023-11-16 18:17:03.1,5", "expected 3 fields (TIMESTAMP, ContextTokens, GeneratedTokens), got 2"),
    (b"2023-11-16 18:17:03.1,5,3,9", "expected 3 fields (TIMESTAMP, ContextTokens, GeneratedTokens), got 4"),
    (b"2023-11-16 18:17:03.1,5.5,3", "bad in_tokens '5.5': expected a whole number"),
    (b"2023-11-16 18:17:03.1,5,", "missing out_tokens"),
    (b",5,3", "missing TIMESTAMP"),
])
def test_bad_azure_rows_are_rejected_with_reasons(row: bytes, reason: str) -> None:
    text = b"TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.0,1,1\n" + row + b"\n\n"
    _, parsed = parse_traffic(text, "a.csv", "azure")
    assert parsed.read == 2 == parsed.frame.height + parsed.rejects.height
    assert parsed.rejects.rows() == [(3, row.decode(), reason)]


def test_missing_header_column_refuses_the_file() -> None:
    with pytest.raises(TrafficError, match=r"a\.csv: azure trace: missing column 'GeneratedTokens'; header has: "
                                           r"TIMESTAMP, ContextTokens"):
        parse_traffic(b"TIMESTAMP,ContextTokens\n2023-11-16 18:17:03.0,1\n", "a.csv", "azure")


def test_mooncake_prefix_blocks_become_cached_tokens() -> None:
    lines = [
        {"timestamp": 0, "input_length": 1200, "output_length": 10, "hash_ids": [1, 2, 3]},     # pays for 1, 2, 3
        {"timestamp": 5, "input_length": 1100, "output_length": 10, "hash_ids": [1, 2, 4]},     # reuses 1, 2
        {"timestamp": 7, "input_length": 300, "output_length": 10, "hash_ids": [1]},            # all but one token
        {"timestamp": 8, "input_length": 9, "output_length": 1, "hash_ids": [9]},
        {"timestamp": 9, "input_length": 2000, "output_length": 10, "hash_ids": [5, 2, 3, 4]},  # prefix broken
        {"timestamp": 12, "input_length": 2048, "output_length": 10, "hash_ids": [5, 2, 3, 4]},  # all but one
    ]
    text = "\n".join(json.dumps(x) for x in lines).replace('"timestamp": 8', '"timestamp": -8')
    fmt, parsed = parse_traffic(text.encode(), "t.jsonl", options=ParseOptions(start_ms=T0))
    assert fmt == "mooncake"
    # the engine computes the last prompt token of a fully cached prompt to produce the first output token
    assert parsed.frame["cached_tokens"].to_list() == [0, 1024, 299, 0, 2047]
    assert parsed.frame["hash_ids"].to_list() == [[1, 2, 3], [1, 2, 4], [1], [5, 2, 3, 4], [5, 2, 3, 4]]
    assert parsed.frame["block_tokens"].to_list() == [512] * 5
    assert parsed.frame["arrival_ms"].to_list() == [T0, T0 + 5, T0 + 7, T0 + 9, T0 + 12]
    # The rejected request never ran, so its block 9 is not cached for anyone.
    assert parsed.rejects.rows() == [(4, text.splitlines()[3],
                                      "bad timestamp -8: expected milliseconds from 0 to 3153600000000 from "
                                      "trace start")]


def test_cached_prefix_is_leading_blocks_only() -> None:
    assert trace_wide_reuse([[1, 2], [3, 2], [1, 3, 2]], [1024, 1024, 1537], 512) == [0, 0, 1536]
    assert trace_wide_reuse([[7], [7, 8], [7, 8]], [300, 600, 600], 256) == [0, 256, 512]


def test_burstgpt_fixture_keeps_failures_and_rejects_inconsistent_rows() -> None:
    fmt, parsed = read_traffic(FIXTURES / "burstgpt_sample.csv", options=ParseOptions(start_ms=T0, model="m"))
    assert fmt == "burstgpt"
    assert parsed.read == 6
    assert parsed.frame.select("arrival_ms", "in_tokens", "out_tokens", "outcome", "model").rows() == [
        (T0 + 5000, 472, 18, "ok", "m"), (T0 + 45000, 1087, 0, "error", "m"), (T0 + 118500, 417, 276, "ok", "m")]
    assert parsed.rejects["reason"].to_list() == [
        "negative in_tokens -3",
        "Total tokens 200 != Request tokens 90 + Response tokens 40",
        "bad Timestamp 'soon': expected seconds from 0 to 3153600000 from trace start"]
    assert parsed.rejects["line"].to_list() == [5, 6, 7]


@pytest.mark.parametrize(("row", "reason"), [
    ("2025-01-01T00:00:01Z,-5,3,,,", "negative in_tokens -5"),
    ("soon,5,3,,,", "unparseable arrival 'soon': expected ISO 8601 such as 2025-01-01T00:00:00Z"),
    ("2025-01-01T00:00:01Z,5,3,9,,", "cached_tokens 9 exceed in_tokens 5"),
    ("2025-01-01T00:00:01Z,5,3,,2.0,1.0", "obs_e2e_s 1.0 is shorter than obs_ttft_s 2.0"),
    ("2025-01-01T00:00:01Z,5,3,,fast,", "bad obs_ttft_s 'fast': expected a number of seconds"),
    ("2025-01-01T00:00:01Z,5,3,,-1,", "negative obs_ttft_s -1.0"),
    ("2025-01-01T00:00:01Z,5", "expected 6 fields (arrival, in_tokens, out_tokens, cached_tokens, obs_ttft_s, "
                               "obs_e2e_s), got 2"),
])
def test_bad_rows_of_the_own_csv_format(row: str, reason: str) -> None:
    text = f"arrival,in_tokens,out_tokens,cached_tokens,obs_ttft_s,obs_e2e_s\n2025-01-01 00:00:00,1,1,,,\n{row}\n"
    _, parsed = parse_traffic(text.encode(), "t.csv")
    assert parsed.frame["arrival_ms"].to_list() == [T0]  # a naive time is UTC
    assert parsed.rejects.rows() == [(3, row, reason)]


def test_time_scale_divides_offsets_from_the_first_arrival() -> None:
    text = f"arrival_ms,in_tokens,out_tokens\n{B + 10000},1,1\n{B + 11000},1,1\n{B + 13000},1,1\n".encode()
    _, parsed = parse_traffic(text, "t.csv", options=ParseOptions(time_scale=2.0))
    assert parsed.frame["arrival_ms"].to_list() == [B + 10000, B + 10500, B + 11500]
    _, slower = parse_traffic(text, "t.csv", options=ParseOptions(time_scale=0.5))
    assert slower.frame["arrival_ms"].to_list() == [B + 10000, B + 12000, B + 16000]


ROWS = st.lists(st.tuples(
    st.integers(B - 10**11, B + 10**10), st.integers(0, 10**6), st.integers(0, 10**5), st.floats(0, 1),
    st.sampled_from(["standard", "premium"]), st.sampled_from(["", "llama"]),
    st.one_of(st.none(), st.floats(0, 100, allow_nan=False)),
), min_size=1, max_size=30)


def _frame(rows: list[tuple]) -> pl.DataFrame:
    return pl.DataFrame({
        "arrival_ms": [r[0] for r in rows], "in_tokens": [r[1] for r in rows], "out_tokens": [r[2] for r in rows],
        "cached_tokens": [int(r[1] * r[3]) for r in rows], "sla_tier": [r[4] for r in rows],
        "model": [r[5] or "x" for r in rows], "obs_ttft_s": [r[6] for r in rows],
    }, schema_overrides={"obs_ttft_s": pl.Float64})


@settings(max_examples=40, deadline=None)
@given(rows=ROWS, fmt=st.sampled_from(["csv", "jsonl", "parquet"]))
def test_own_formats_round_trip(rows: list[tuple], fmt: str) -> None:
    frame = _frame(rows)
    buf = io.BytesIO()
    if fmt == "csv":
        frame.write_csv(buf)
    elif fmt == "jsonl":
        frame.write_ndjson(buf)
    else:
        frame.write_parquet(buf)
    detected, parsed = parse_traffic(buf.getvalue(), f"t.{fmt}")
    assert detected == fmt
    assert parsed.rejects.height == 0 and parsed.read == len(rows)
    assert parsed.frame.select(frame.columns).equals(frame)
    assert parsed.frame["seq"].to_list() == list(range(len(rows)))


def test_jsonl_lines_that_are_not_objects_are_rejected() -> None:
    text = (f'{{"arrival_ms": {B + 1}, "in_tokens": 2, "out_tokens": 3}}\n[1, 2]\n{{oops\n\n'
            f'{{"arrival_ms": {B + 2}, "in_tokens": 2}}\n').encode()
    _, parsed = parse_traffic(text, "t.jsonl")
    assert parsed.read == 4 and parsed.frame.height == 1
    assert [r.split(" (")[0] for r in parsed.rejects["reason"].to_list()] == [
        "expected a JSON object, got list", "not JSON", "missing out_tokens"]
    assert parsed.rejects["line"].to_list() == [2, 3, 5]


def test_read_traffic_names_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(TrafficError, match=r"nope\.csv: file not found"):
        read_traffic(tmp_path / "nope.csv")


@pytest.mark.parametrize(("value", "reason"), [
    ("0", "max_tokens 0: a client asks for at least 1 output token"),
    ("2", "out_tokens 3 exceed the client's max_tokens 2"),
    ("many", "bad max_tokens 'many': expected a whole number"),
    ("-4", "negative max_tokens -4"),
])
def test_bad_max_tokens_are_rejected_with_reasons(value: str, reason: str) -> None:
    row = f"{B + 2},5,3,{value}"
    _, parsed = parse_traffic(f"arrival_ms,in_tokens,out_tokens,max_tokens\n{B + 1},5,3,8\n{row}\n".encode(),
                              "t.csv")
    assert parsed.frame["max_tokens"].to_list() == [8]
    assert parsed.rejects.rows() == [(3, row, reason)]


def test_max_tokens_is_kept_where_the_client_sent_one() -> None:
    text = (f'{{"arrival_ms": {B + 1}, "in_tokens": 9, "out_tokens": 3, "max_tokens": 512}}\n'
            f'{{"arrival_ms": {B + 2}, "in_tokens": 9, "out_tokens": 3}}\n').encode()
    _, parsed = parse_traffic(text, "t.jsonl")
    assert parsed.frame["max_tokens"].to_list() == [512, None]
    _, plain = parse_traffic(f"arrival_ms,in_tokens,out_tokens\n{B + 1},9,3\n".encode(), "t.csv")
    assert plain.frame["max_tokens"].to_list() == [None]


@pytest.mark.parametrize(("column", "value", "reason"), [
    ("images", "-1", "negative images -1"),
    ("images", "2.5", "bad images '2.5': expected a whole number"),
    ("images", "two", "bad images 'two': expected a whole number"),
    ("image_tokens", "-300", "negative image_tokens -300"),
    ("image_tokens", "1e3", "bad image_tokens '1e3': expected a whole number"),
])
def test_bad_image_counts_are_rejected_with_reasons(column: str, value: str, reason: str) -> None:
    row = f"{T0 + 2},5,3,{value}"
    _, parsed = parse_traffic(f"arrival_ms,in_tokens,out_tokens,{column}\n{T0 + 1},5,3,2\n{row}\n".encode(), "t.csv")
    assert parsed.frame[column].to_list() == [2]
    assert parsed.rejects.rows() == [(3, row, reason)]
    assert parsed.read == parsed.frame.height + parsed.rejects.height


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "parquet"])
def test_images_and_their_tokens_are_read_in_every_own_format_and_default_to_none(fmt: str) -> None:
    frame = pl.DataFrame({"arrival_ms": [T0 + 1, T0 + 2, T0 + 3], "in_tokens": [10, 10, 10], "out_tokens": [1, 1, 1],
                          "images": [2, None, 0], "image_tokens": [None, 512, 0]})
    buf = io.BytesIO()
    {"csv": frame.write_csv, "jsonl": frame.write_ndjson, "parquet": frame.write_parquet}[fmt](buf)
    _, parsed = parse_traffic(buf.getvalue(), f"t.{fmt}")
    assert parsed.frame["images"].to_list() == [2, 0, 0]
    assert parsed.frame["image_tokens"].to_list() == [0, 512, 0]
    _, plain = parse_traffic(f"arrival_ms,in_tokens,out_tokens\n{T0 + 1},9,3\n".encode(), "t.csv")
    assert plain.frame["images"].to_list() == [0] and plain.frame["image_tokens"].to_list() == [0]
    # a JSON float is not a count
    _, floats = parse_traffic(f'{{"arrival_ms": {T0 + 1}, "in_tokens": 9, "out_tokens": 3, "images": 1.5}}\n'.encode(),
                              "t.jsonl")
    assert floats.rejects["reason"].to_list() == ["bad images '1.5': expected a whole number"]
