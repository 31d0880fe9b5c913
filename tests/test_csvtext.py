"""CSV text as numbered records: the one reader of the traces, the onboarding evidence and the benchmark tables."""

from __future__ import annotations

from pathlib import Path

import pytest

from canonical.csvtext import csv_lines, csv_records
from onboarding.evidence import parse_evidence
from onboarding.exceptions import EvidenceError
from replay.benchtable import parse_bench_table, read_bench_table
from replay.exceptions import BenchTableError

LIMIT = "not valid CSV: field larger than field limit (131072)"  # the csv module's default field_size_limit
BENCH_HEADER = "pool,isl,osl,concurrency,ttft_ms,tpot_ms\n"


class Bad(Exception):
    """What the test's caller makes of a bad record."""


def bad(line: int, message: str) -> Bad:
    return Bad(line, message)


def test_each_record_comes_with_the_line_it_ends_on() -> None:
    text = 'a,b\n1,"two\nlines"\n\n3, 4 \r5,6\r\n'
    assert list(csv_records(text, bad)) == [(1, ["a", "b"]), (3, ["1", "two\nlines"]), (4, []), (5, ["3", " 4 "]),
                                            (6, ["5", "6"])]  # a lone CR ends a record, as it does in a file
    assert list(csv_records("", bad)) == []


def test_a_record_the_csv_module_cannot_read_is_the_callers_error_at_its_line() -> None:
    records = csv_records("a\nb\n" + "x" * 200_000 + "\nc\n", bad)
    assert next(records) == (1, ["a"]) and next(records) == (2, ["b"])  # the good records come first
    with pytest.raises(Bad) as exc:
        next(records)
    assert exc.value.args == (3, LIMIT)


def test_lines_name_where_each_record_starts_and_ends_and_go_on_after_a_bad_one() -> None:
    text = "a\n" + "x" * 200_000 + '\nb,"c\nd"\n\ne\n'
    assert list(csv_lines(text)) == [(1, 1, ["a"], None), (2, 2, None, LIMIT.removeprefix("not valid CSV: ")),
                                     (3, 4, ["b", "c\nd"], None), (5, 5, [], None), (6, 6, ["e"], None)]


# (text, the error's message): the file and line named as before the loaders shared the reader
BAD_CSV = [
    (BENCH_HEADER + "x" * 200_000 + "\n", f"b.csv:2: {LIMIT}"),
    (BENCH_HEADER + "h100-a,1024,128,16,187.5,21.4\n\n" + "x" * 200_000, f"b.csv:4: {LIMIT}"),
]


@pytest.mark.parametrize(("text", "said"), BAD_CSV, ids=("line 2", "line 4"))
def test_a_benchmark_table_names_file_and_line(text: str, said: str, tmp_path: Path) -> None:
    with pytest.raises(BenchTableError) as exc:
        parse_bench_table(text, "b.csv")
    assert str(exc.value) == said
    path = tmp_path / "b.csv"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(BenchTableError) as exc:
        read_bench_table(path)
    assert str(exc.value) == said.replace("b.csv", str(path), 1)


@pytest.mark.parametrize(("item", "text", "said"), [
    ("operators", "op,max_abs_err,tol\nmatmul,0.1,0.2\n" + "x" * 200_000 + ",1,1\n", f"e.csv:3: {LIMIT}"),
    ("precision", "step,grad_norm\n" + "x" * 200_000, f"e.csv:2: {LIMIT}"),
    ("benchmark", BENCH_HEADER + "h100-a,1024,128,16,187.5,21.4\n" + "x" * 200_000, f"e.csv:3: {LIMIT}"),
], ids=("operators", "precision", "benchmark"))
def test_an_evidence_file_names_file_and_line(item: str, text: str, said: str) -> None:
    with pytest.raises(EvidenceError) as exc:
        parse_evidence(item, text, "e.csv")
    assert str(exc.value) == said
    assert (exc.value.source, exc.value.line, exc.value.column) == ("e.csv", int(said.split(":")[1]), None)
