"""CSV text as numbered records, for the table loaders of the layers above (onboarding evidence, benchmark tables).

Here because it is the lowest layer that all of them may import; it raises no error of its own: the caller says
what a record the csv module cannot read becomes, so each layer keeps its own exception and message.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Iterator


def csv_records(text: str, bad_record: Callable[[int, str], Exception]) -> Iterator[tuple[int, list[str]]]:
    """(line, values) of each CSV record of text; a record the csv module cannot read raises
    bad_record(line, "not valid CSV: <why>"), its line counted from 1."""
    reader = csv.reader(io.StringIO(text, newline=""))  # newline="": a lone CR ends a record, as in a file
    while True:
        try:
            values = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            raise bad_record(max(reader.line_num, 1), f"not valid CSV: {exc}") from None
        yield reader.line_num, values
