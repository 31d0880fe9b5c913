"""CSV text as numbered records: the one CSV reader of the table loaders (traces, benchmark tables, evidence).

Here because it is the lowest layer all of them may import; it raises no error of its own: the caller says what
a record the csv module cannot read becomes (an error, or a rejected row), so each layer keeps its own
exception and message.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Iterator


def csv_lines(text: str) -> Iterator[tuple[int, int, list[str] | None, str | None]]:
    """(first line, last line, values, None) of each CSV record of text, counted from 1; a record the csv
    module cannot read is (first line, last line, None, why) and the reading goes on after it."""
    reader = csv.reader(io.StringIO(text, newline=""))  # newline="": a lone CR ends a record, as in a file
    line = 0
    while True:
        start = line + 1
        try:
            values = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            line = reader.line_num
            yield start, max(line, 1), None, str(exc)
            continue
        line = reader.line_num
        yield start, line, values, None


def csv_records(text: str, bad_record: Callable[[int, str], Exception]) -> Iterator[tuple[int, list[str]]]:
    """(line, values) of each CSV record of text, its line the one it ends on; a record the csv module cannot
    read raises bad_record(line, "not valid CSV: <why>")."""
    for _, end, values, why in csv_lines(text):
        if values is None:
            raise bad_record(end, f"not valid CSV: {why}")
        yield end, values
