"""CSV text to a raw all-string frame with exact line numbers; rows of the wrong width become rejects."""

from __future__ import annotations

import polars as pl

from canonical.csvtext import csv_lines
from traces.exceptions import TrafficError

_BOOKKEEPING = ("seq", "line", "record", "reason")


def decode(data: bytes, source: str) -> str:
    """UTF-8 text (a BOM is dropped), or a TrafficError naming the file."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise TrafficError(f"{source}: not UTF-8 text (byte {exc.start}: {exc.reason})") from None


def read_rows(text: str, source: str, required: tuple[str, ...]) -> tuple[pl.DataFrame, int]:
    """Parse CSV text into (raw frame, records read); the frame has one string column per header field.

    Blank lines are not records. A row with fewer or more fields than the header is kept with a reason so
    that it is rejected, never silently padded or truncated.
    """
    records = csv_lines(text)
    first = next(records, None)
    if first is not None and first[2] is None:
        raise TrafficError(f"{source}: line 1: bad CSV header ({first[3]})") from None
    header = [h.strip() for h in (first[2] or [])] if first is not None else []
    absent = [c for c in required if c not in header]
    if absent:
        raise TrafficError(f"{source}: missing column {', '.join(repr(c) for c in absent)}; "
                           f"header has: {', '.join(header) or '(nothing)'}")
    twice = sorted({h for h in header if header.count(h) > 1})
    if twice:
        raise TrafficError(f"{source}: line 1: column {', '.join(repr(h) for h in twice)} named more than once")
    width = len(header)
    cols: list[list[str | None]] = [[] for _ in header]
    lines: list[int] = []
    records_text: list[str] = []
    reasons: list[str | None] = []
    for start, _, row, why in records:
        if row is None:
            lines.append(start)
            records_text.append("")
            reasons.append(f"bad CSV row ({why})")
            for col in cols:
                col.append(None)
            continue
        if not row or (len(row) == 1 and not row[0].strip()):
            continue
        lines.append(start)
        records_text.append(",".join(row))
        if len(row) != width:
            reasons.append(f"expected {width} fields ({', '.join(header)}), got {len(row)}")
            row = (row + [""] * width)[:width]
        else:
            reasons.append(None)
        for col, value in zip(cols, row, strict=True):
            col.append(value)
    # a file's own column named like one of the bookkeeping columns keeps its values under another name
    header = [f"_{h}" if h in _BOOKKEEPING else h for h in header]
    frame = pl.DataFrame(
        {name: pl.Series(name, values, dtype=pl.String) for name, values in zip(header, cols, strict=True)}
    ).with_columns(
        pl.Series("line", lines, dtype=pl.Int64), pl.Series("record", records_text, dtype=pl.String),
        pl.Series("reason", reasons, dtype=pl.String),
    ) if header else pl.DataFrame()
    if frame.height == 0:
        frame = pl.DataFrame(schema={**{h: pl.String() for h in header}, "line": pl.Int64(),
                                     "record": pl.String(), "reason": pl.String()})
    frame = frame.with_row_index("seq").with_columns(pl.col("seq").cast(pl.Int64))
    return frame, frame.height
