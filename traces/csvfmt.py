"""The project's own CSV request format (see traces.canonical for the columns)."""

from __future__ import annotations

from traces.base import Parsed, ParseOptions
from traces.canonical import from_raw
from traces.csvrows import decode, read_rows


class CsvFormat:
    """hetpool request CSV."""

    name = "csv"

    def sniff(self, filename: str, head: bytes) -> bool:
        """A .csv file whose header has in_tokens."""
        first = head.decode("utf-8-sig", errors="replace").splitlines()[:1]
        return filename.lower().endswith(".csv") or (bool(first) and "in_tokens" in first[0])

    def parse(self, data: bytes, options: ParseOptions) -> Parsed:
        """Parse the CSV into the canonical frame."""
        raw, read = read_rows(decode(data, "traffic CSV"), "traffic CSV", ())
        return from_raw(raw, options, read, "traffic CSV")


FORMAT = CsvFormat()
