"""Rejected records held within bounds: every one counted by its reason, a sample of each reason kept as examples.

A small input can reject millions of records (a compressed file of one bad line repeated); holding each of them
would cost gigabytes. So a reader counts them all, exactly, and keeps the first KEEP_PER_REASON of each reason
(at most KEEP_PER_RUN in all) with their line, text and reason. Reasons often quote the offending value, so
they are many when the values differ: past MAX_REASONS distinct reasons the rest are counted under OTHER.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping

import polars as pl

from canonical.schemas import REJECT_SCHEMA

KEEP_PER_REASON = 1_000
KEEP_PER_RUN = 10_000
MAX_REASONS = 1_000
OTHER = "other reasons (past the first 1000 distinct reasons of the run)"


def bounded_reason(counts: Mapping[str, int], reason: str) -> str:
    """`reason`, or OTHER when `counts` already holds MAX_REASONS others."""
    return reason if reason in counts or len(counts) < MAX_REASONS else OTHER


class RejectLog:
    """Rejects as they are found (`append` a {line, record, reason} row): the examples kept, and the count of
    those not kept by reason."""

    def __init__(self, keep_per_reason: int = KEEP_PER_REASON, keep: int = KEEP_PER_RUN):
        self.keep_per_reason, self.keep = keep_per_reason, keep
        self.kept: list[dict[str, object]] = []
        self.by_reason: Counter[str] = Counter()  # kept and not, per reason
        self.unkept: Counter[str] = Counter()

    def append(self, row: dict[str, object]) -> None:
        """Count a reject; keep it when its reason has room."""
        reason = bounded_reason(self.by_reason, str(row["reason"]))
        self.by_reason[reason] += 1
        if self.by_reason[reason] <= self.keep_per_reason and len(self.kept) < self.keep and reason != OTHER:
            self.kept.append(row)
        else:
            self.unkept[reason] += 1

    def room(self, reason: str) -> bool:
        """Whether a reject of `reason` would be kept as an example (else `skip` counts it more cheaply)."""
        reason = bounded_reason(self.by_reason, reason)
        return reason != OTHER and self.by_reason[reason] < self.keep_per_reason and len(self.kept) < self.keep

    def skip(self, reason: str) -> None:
        """Count a reject that has no room, without building its row."""
        reason = bounded_reason(self.by_reason, reason)
        self.by_reason[reason] += 1
        self.unkept[reason] += 1

    def extend(self, reason: str, rows: pl.DataFrame, record: Callable[[str], str]) -> None:
        """Rejects of one reason at once: `rows` of (line, text), the first that have room kept (their record
        made from the text by `record`), the rest only counted."""
        n = rows.height
        take = 0
        while take < n and self.room(reason):
            line, text = rows.row(take)
            self.append({"line": line, "record": record(text), "reason": reason})
            take += 1
        if n > take:
            bucket = bounded_reason(self.by_reason, reason)
            self.by_reason[bucket] += n - take
            self.unkept[bucket] += n - take

    def __bool__(self) -> bool:
        return bool(self.kept) or bool(self.unkept)

    def __len__(self) -> int:
        return len(self.kept) + sum(self.unkept.values())

    def frame(self) -> pl.DataFrame:
        """The kept examples as REJECT_SCHEMA rows, in line order."""
        if not self.kept:
            return pl.DataFrame(schema=REJECT_SCHEMA)
        return pl.DataFrame(self.kept, schema=REJECT_SCHEMA).sort("line")
