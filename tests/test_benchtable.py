"""Benchmark tables: every bad value is an error naming file, line and column."""

from __future__ import annotations

from pathlib import Path

import pytest

from replay import BenchTableError, parse_bench_table, read_bench_table

HEAD = "pool,isl,osl,concurrency,ttft_ms,tpot_ms\n"


def test_a_good_table_reads_with_lines() -> None:
    t = parse_bench_table(HEAD + "h100-a,1024,128,16,187.5,21.4\n\nh100-a,1024,128,32,250,30\n", "b.csv")
    assert t["line"].to_list() == [2, 4] and t["concurrency"].to_list() == [16, 32]
    assert t["output_tok_s"].to_list() == [None, None]
    t = parse_bench_table("pool,isl,osl,concurrency,ttft_ms,tpot_ms,output_tok_s\na,1,2,3,4.5,6,700\n")
    assert t["output_tok_s"].to_list() == [700.0]
    assert t["arrivals"].to_list() == ["staggered"]
    t = parse_bench_table(HEAD.strip() + ",arrivals\na,1,2,3,4.5,6,lockstep\na,1,2,3,4.5,6,\n")
    assert t["arrivals"].to_list() == ["lockstep", "staggered"]


def test_a_table_says_how_its_client_drew_and_how_many_it_sent() -> None:
    t = parse_bench_table(HEAD.strip() + ",range_ratio,range_style,num_prompts\n"
                          "a,1024,1024,4,50,9,0.8,up_to,40\n"     # InferenceMAX's client: up to, 10 per client
                          "a,1024,1024,8,50,9,0.1,,\n"            # vllm bench serve's reading, the default
                          "a,1024,1024,16,50,9,,,\n"               # fixed lengths, calibration's own count
                          "a,1024,1024,32,50,9,1,up_to,320\n")     # SGLang's fixed lengths
    assert t["range_ratio"].to_list() == [0.8, 0.1, 0.0, 1.0]
    assert t["range_style"].to_list() == ["up_to", "around", "around", "up_to"]
    assert t["num_prompts"].to_list() == [40, None, None, 320]
    plain = parse_bench_table(HEAD + "a,1,2,3,4.5,6\n")
    assert plain.select("range_ratio", "range_style", "num_prompts", "statistic").row(0) == (0.0, "around", None,
                                                                                            None)


def test_a_table_says_which_statistic_its_latencies_are() -> None:
    t = parse_bench_table(HEAD.strip() + ",statistic\na,1,2,3,4.5,6,mean\na,1,2,3,4.5,6,\na,1,2,3,4.5,6,median\n"
                          "a,1,2,3,4.5,6,p99\n")
    assert t["statistic"].to_list() == ["mean", None, "median", "p99"]  # empty: not said


RANGE_HEAD = HEAD.strip() + ",range_ratio,range_style,num_prompts\n"


@pytest.mark.parametrize(("text", "message"), [
    (RANGE_HEAD + "a,1,1,1,1,1,1,,\n",
     "b.csv:2: column range_ratio: expected a random range ratio in [0, 1), got 1.0 (range_style around)"),
    (RANGE_HEAD + "a,1,1,1,1,1,1.5,up_to,\n",
     "b.csv:2: column range_ratio: expected a random range ratio in [0, 1] up to the lengths, got 1.5 "
     "(range_style up_to)"),
    (RANGE_HEAD + "a,1,1,1,1,1,-0.1,up_to,\n", "b.csv:2: column range_ratio: expected a random range ratio in [0, 1]"),
    (RANGE_HEAD + "a,1,1,1,1,1,nan,,\n", "b.csv:2: column range_ratio: expected a random range ratio in [0, 1), "
                                         "got nan"),
    (RANGE_HEAD + "a,1,1,1,1,1,ten,,\n", "b.csv:2: column range_ratio: expected a number, got 'ten'"),
    (RANGE_HEAD + "a,1,1,1,1,1,0.5,below,\n",
     "b.csv:2: column range_style: unknown value 'below'; expected around or up_to"),
    (RANGE_HEAD + "a,1,1,1,1,1,0.5,,0\n", "b.csv:2: column num_prompts: must be >= 1, got 0"),
    (RANGE_HEAD + "a,1,1,1,1,1,0.5,,many\n", "b.csv:2: column num_prompts: expected a whole number, got 'many'"),
    (HEAD.strip() + ",statistic\na,1,1,1,1,1,p50\n", "b.csv:2: column statistic: unknown value 'p50'; expected "
                                                      "one of median, mean, p99"),
])
def test_bad_client_columns(text: str, message: str) -> None:
    with pytest.raises(BenchTableError) as exc:
        parse_bench_table(text, "b.csv")
    assert str(exc.value).startswith(message), str(exc.value)


@pytest.mark.parametrize(("text", "message"), [
    ("", "b.csv:1: empty file; expected the header pool,isl,osl,concurrency,ttft_ms,tpot_ms"),
    ("pool,isl,osl,ttft_ms,tpot_ms\n", "b.csv:1: missing column concurrency"),
    (HEAD.strip() + ",gpu\n", "b.csv:1: unknown column gpu"),
    (HEAD, "b.csv: no benchmark rows after the header"),
    (HEAD + "a,1024,128,16,187.5\n", "b.csv:2: expected 6 values, got 5"),
    (HEAD + ",1024,128,16,1,2\n", "b.csv:2: column pool: missing pool id"),
    (HEAD + "a,1k,128,16,1,2\n", "b.csv:2: column isl: expected a whole number, got '1k'"),
    (HEAD + "a,1024,0,16,1,2\n", "b.csv:2: column osl: must be >= 1, got 0"),
    (HEAD + "a,1024,128,0,1,2\n", "b.csv:2: column concurrency: must be >= 1, got 0"),
    (HEAD + "a,1024,128,16,fast,2\n", "b.csv:2: column ttft_ms: expected a number, got 'fast'"),
    (HEAD + "a,1024,128,16,1,-2\n", "b.csv:2: column tpot_ms: must be a positive finite number, got -2"),
    (HEAD + "a,1024,128,16,1,\n", "b.csv:2: column tpot_ms: missing value"),
    (HEAD.strip() + ",arrivals\na,1,1,1,1,1,burst\n",
     "b.csv:2: column arrivals: unknown value 'burst'; expected staggered or lockstep"),
    (HEAD + "a,1,1,1,1,1\na,1,1,1,inf,1\n", "b.csv:3: column ttft_ms: must be a positive finite number, got inf"),
])
def test_bad_tables(text: str, message: str) -> None:
    with pytest.raises(BenchTableError) as exc:
        parse_bench_table(text, "b.csv")
    assert str(exc.value) == message or str(exc.value).startswith(message)


def test_a_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(BenchTableError, match=r"nope\.csv: file not found"):
        read_bench_table(tmp_path / "nope.csv")
