"""The project's own CSV request format (see replay.traffic.canonical for the columns)."""

from __future__ import annotations

from replay.traffic.base import Parsed, ParseOptions
from replay.traffic.canonical import from_raw
from replay.traffic.csvrows import decode, read_rows


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
