"""Streaming, vectorized parser of Prometheus text format and OpenMetrics exposition.

Bytes go in chunk by chunk (`feed`), so a file larger than memory streams through. Each chunk's complete
lines become one Arrow string column without copying; Polars string kernels then split every ordinary line
into its series text (`name{labels}` as written), value and timestamp. A series text is parsed for its labels
once, the first time it is seen. Lines the fast path is unsure of (escapes, exemplars, float timestamps, odd
spacing) go to `textformat.parse_line`, one by one. Lines that are not valid exposition are rejects with
their line number and the reason, and parsing goes on.

Timestamps come out in epoch ms; see `textformat.SECONDS_BELOW` for how seconds are told apart.
"""

from __future__ import annotations

import codecs
import mmap
from dataclasses import dataclass, field

import numpy as np
import polars as pl
import pyarrow as pa

from canonical.prometheus import family_of
from canonical.rejectlog import RejectLog
from canonical.schemas import RECORD_MAX_CHARS, REJECT_SCHEMA
from normalizers.textformat import SECONDS_BELOW, LineError, parse_line, parse_series, render_series

MAX_LINE_BYTES = 1 << 20  # longer lines are rejected without being held in memory
SEARCH_BYTES = 8 << 20  # newlines are searched this many bytes at a time: a small scratch that stays in cache

RAW_SCHEMA = {"line": pl.Int64, "key": pl.Categorical, "value": pl.Float64, "ts_ms": pl.Int64, "text": pl.String}

Series = tuple[str, dict[str, str]]  # metric name as written, labels
_UNSEEN, _VALID, _INVALID = 0, 1, 2
_Lines = tuple[pl.Series, pl.Series, int, tuple[bool, bool]]  # texts, comment flags, first line number, block flags
Buffer = bytes | bytearray | memoryview


@dataclass
class RawBatch:
    """Parsed samples of one chunk: each row points at its series by `key` (the series text)."""

    samples: pl.DataFrame                      # RAW_SCHEMA, one row per sample line
    series: dict[str, Series]                  # key -> (name, labels), for every key in samples (and more)
    rejects: pl.DataFrame                      # REJECT_SCHEMA, lines that are not valid exposition (examples)
    types: dict[str, str] = field(default_factory=dict)  # metric family -> # TYPE, as seen so far
    unkept: dict[str, int] = field(default_factory=dict)  # rejects beyond the examples kept, by reason

    @property
    def reads(self) -> int:
        """Sample lines read: every one is either in samples or in rejects (kept as an example or counted)."""
        return self.samples.height + self.rejects.height + sum(self.unkept.values())

    def to_frame(self) -> pl.DataFrame:
        """The raw sample frame: line, name, labels (list of name/value), value, ts_ms, type."""
        keys = list(self.series)
        names = [self.series[k][0] for k in keys]
        table = pl.DataFrame({
            "key": pl.Series(keys, dtype=pl.String).cast(pl.Categorical),
            "name": names,
            "labels": [[{"name": n, "value": v} for n, v in self.series[k][1].items()] for k in keys],
            "type": [family_type(n, self.types) for n in names],
        }, schema_overrides={"labels": pl.List(pl.Struct({"name": pl.String, "value": pl.String})),
                             "type": pl.String})
        return self.samples.join(table, on="key", how="left").select(
            "line", "name", "labels", "value", "ts_ms", "type")


def family_type(name: str, types: dict[str, str]) -> str | None:
    """The # TYPE of the family a sample name belongs to (histogram parts, counter _total...)."""
    family = family_of(name, types)
    return None if family is None else types[family]


def _record(text: str) -> str:
    return text.rstrip("\r\n")[:RECORD_MAX_CHARS]


class ExpositionParser:
    """Feed bytes in any chunking; get one RawBatch per call. Keeps line numbers and # TYPE across calls."""

    def __init__(self, *, max_line_bytes: int = MAX_LINE_BYTES):
        self.max_line_bytes = max_line_bytes
        self.types: dict[str, str] = {}
        self._series: dict[str, Series | str] = {}  # key -> parsed series, or the reason it is invalid
        self._valid: dict[str, Series] = {}  # the valid ones: every batch's `series`
        self._status = np.zeros(0, dtype=np.int8)  # per dictionary code of a key: _UNSEEN, _VALID or _INVALID
        self._carry = b""
        self._skipping = False  # inside an over-long line, dropping bytes until its newline
        self._line = 0          # lines completed so far
        self._buffer: np.ndarray | None = None
        self._eof: int | None = None  # line of the first '# EOF'

    # -- streaming ------------------------------------------------------------------------------
    def feed(self, data: Buffer) -> RawBatch:
        """Parse every complete line in carry + data; keep the unfinished tail for the next call.

        `data` is any bytes-like object (bytes, or a memoryview of a memory-mapped file chunk). The batch's
        strings point into it, so it is kept alive by the batch rather than copied.
        """
        rejects = RejectLog()
        view = memoryview(data).cast("B")
        arr = np.frombuffer(view, dtype=np.uint8)
        ends = self._newlines(arr)
        start, i = 0, 0
        if self._skipping:
            if not len(ends):
                return self._batch(None, rejects)
            start, i, self._skipping = int(ends[0]) + 1, 1, False  # the line was counted when rejected
        if i >= len(ends):
            self._carry += bytes(view[start:])
            if len(self._carry) > self.max_line_bytes:
                self._reject_long(rejects, self._carry)
            return self._batch(None, rejects)
        last = int(ends[-1])
        blocks: list[tuple[Buffer, np.ndarray | None]] = []
        flags = _flags(data)
        if self._carry:  # the line begun in the previous chunk ends here; its first part counts for the flags
            held = _flags(self._carry)
            flags = (flags[0] or held[0], flags[1] or held[1])
            first_nl = int(ends[i])
            blocks.append((self._carry + bytes(view[start:first_nl + 1]), None))
            start, i = first_nl + 1, i + 1
        if start <= last:
            blocks.append((view[start:last + 1], ends[i:] - start))
        self._carry = bytes(view[last + 1:])
        lines = self._lines(blocks, rejects, flags)
        if len(self._carry) > self.max_line_bytes:
            self._reject_long(rejects, self._carry)
        return self._batch(lines, rejects)

    def finish(self) -> RawBatch:
        """Parse the last line when the input did not end with a newline."""
        rejects = RejectLog()
        tail, self._carry = self._carry, b""
        if self._skipping or not tail:
            self._skipping = False
            return self._batch(None, rejects)
        return self._batch(self._lines([(tail + b"\n", None)], rejects, _flags(tail)), rejects)

    def _reject_long(self, rejects: RejectLog, head: bytes) -> None:
        self._line += 1
        rejects.append({"line": self._line, "record": head[:RECORD_MAX_CHARS].decode("utf-8", "replace"),
                        "reason": f"line longer than {self.max_line_bytes} bytes"})
        self._carry, self._skipping = b"", True

    # -- one block of complete lines -----------------------------------------------------------
    def _lines(self, blocks: list[tuple[Buffer, np.ndarray | None]], rejects: RejectLog,
               flags: tuple[bool, bool]) -> _Lines:
        """The lines (each still ending in '\\n') as one string column, whether each is a comment (from its
        first byte, which is cheaper than a string kernel), the first line number, and flags."""
        first = self._line + 1
        chunks: list[pa.Array] = []
        comments: list[np.ndarray] = []
        for block, ends in blocks:
            arr = np.frombuffer(block, dtype=np.uint8)
            if not len(arr):
                continue
            if not _ascii(arr) and not _valid_utf8(block):
                checked = self._checked_lines(bytes(block), rejects)
                chunks.append(checked)
                comments.append(np.array([t.startswith("#") for t in checked.to_pylist()], dtype=bool))
                continue
            if ends is None:
                ends = np.flatnonzero(arr == 10)
            offsets = np.empty(len(ends) + 1, dtype=np.int64)
            offsets[0] = 0
            offsets[1:] = ends + 1
            chunks.append(pa.LargeStringArray.from_buffers(len(ends), pa.py_buffer(offsets), pa.py_buffer(block)))
            comments.append(arr[offsets[:-1]] == ord("#"))
            self._line += len(ends)
        texts = pl.Series("text", pa.chunked_array(chunks, type=pa.large_string()), dtype=pl.String)
        return texts, pl.Series("comment", np.concatenate(comments) if comments else [], dtype=pl.Boolean), first, flags

    def _newlines(self, arr: np.ndarray) -> np.ndarray:
        """Offsets of every newline in arr."""
        found = [np.flatnonzero(np.equal(arr[at:at + SEARCH_BYTES], 10,
                                         out=self._scratch(min(SEARCH_BYTES, len(arr) - at)))) + at
                 for at in range(0, len(arr), SEARCH_BYTES)]
        return found[0] if len(found) == 1 else np.concatenate(found) if found else np.zeros(0, dtype=np.int64)

    def _scratch(self, n: int) -> np.ndarray:
        """A reusable boolean buffer: newline search without allocating (and faulting in) a new one per chunk."""
        if self._buffer is None or len(self._buffer) < n:
            self._buffer = np.empty(n, dtype=bool)
        return self._buffer[:n]

    def _checked_lines(self, block: bytes, rejects: RejectLog) -> pa.Array:
        """Lines of a block that is not all valid UTF-8: the bad lines are rejected one by one."""
        texts: list[str] = []
        for raw in block.split(b"\n")[:-1]:
            self._line += 1
            try:
                texts.append(raw.decode("utf-8") + "\n")
            except UnicodeDecodeError as exc:
                rejects.append({"line": self._line, "record": raw[:RECORD_MAX_CHARS].decode("utf-8", "replace"),
                                "reason": f"not UTF-8 text (byte 0x{raw[exc.start]:02x} at column {exc.start + 1})"})
                texts.append("#\n")  # a placeholder comment keeps the numbering; comments are not reads
        return pa.array(texts, type=pa.large_string())

    def _batch(self, lines: _Lines | None, rejects: RejectLog) -> RawBatch:
        if lines is None:  # no complete line yet (a small chunk): shared empty frames, nothing to build
            return RawBatch(_NO_SAMPLES, {}, rejects.frame() if rejects else _NO_REJECTS, dict(self.types),
                            dict(rejects.unkept))
        texts, comment, first, flags = lines
        frame = _split(pl.DataFrame([texts, comment]), first, flags)
        # most blocks are all samples and comments: filter only for the kinds present
        counts = np.bincount(frame.get_column("kind").to_numpy(), minlength=4)
        if counts[1]:
            found = frame.lazy().filter(pl.col("kind") == 1).select("line", "text").collect()
            comments = found.get_column("text")
            self._comments(comments.filter(comments.str.contains("TYPE", literal=True)))
            if self._eof is None:
                eof = found.filter(comments.str.strip_chars() == "# EOF").get_column("line")
                self._eof = int(eof[0]) if len(eof) else None
        rows = frame.lazy().filter(pl.col("kind") == 2) if counts[2] < frame.height else frame.lazy()
        fast = rows.select("line", "key", "value", "ts_ms", "text").collect()
        if counts[3]:
            slow = self._slow(frame.filter(pl.col("kind") == 3).select("line", "text"), rejects)
            fast = pl.concat([p for p in (fast, slow) if p.height] or [_empty_samples()])
        if self._eof is not None:
            fast = self._after_eof(fast, rejects)
        samples = self._resolve(fast, rejects)
        return RawBatch(samples, self._valid, rejects.frame(), dict(self.types), dict(rejects.unkept))

    def _after_eof(self, fast: pl.DataFrame, rejects: RejectLog) -> pl.DataFrame:
        """OpenMetrics ends the exposition at '# EOF': later samples are rejects, not data."""
        late = fast.get_column("line") > self._eof
        if not late.any():
            return fast
        for line, text in fast.filter(late).select("line", "text").iter_rows():
            rejects.append({"line": line, "record": _record(text),
                            "reason": f"after '# EOF' at line {self._eof}, where the exposition ends"})
        return fast.filter(~late)

    def _comments(self, texts: pl.Series) -> None:
        """Keep the # TYPE of each family (lines without "TYPE" may be left out)."""
        for text in texts:
            parts = text.split()
            if len(parts) >= 4 and parts[1] == "TYPE":
                self.types[parts[2]] = parts[3]

    def _slow(self, frame: pl.DataFrame, rejects: RejectLog) -> pl.DataFrame:
        """Lines the fast split could not take, parsed one distinct text at a time (a hostile file repeats one
        bad line millions of times: it is parsed once, and its rejects are counted in bulk)."""
        parsed_as: dict[str, tuple[str | None, float | None, int | None, str | None]] = {}
        for text in frame.get_column("text").unique(maintain_order=True):
            body = text.rstrip("\r\n")
            if not body.strip():
                parsed_as[text] = (None, None, None, None)  # a blank line: neither a sample nor a reject
                continue
            try:
                parsed = parse_line(body.strip(" \t"))
            except LineError as exc:
                parsed_as[text] = (None, None, None, str(exc))
                continue
            key = render_series(parsed.name, parsed.labels)
            self._series.setdefault(key, (parsed.name, parsed.labels))
            parsed_as[text] = (key, parsed.value, parsed.ts_ms, None)
        table = pl.DataFrame({"text": list(parsed_as), **{
            col: [v[i] for v in parsed_as.values()] for i, col in enumerate(("key", "value", "ts_ms", "reason"))}},
            schema={"text": pl.String, "key": pl.String, "value": pl.Float64, "ts_ms": pl.Int64, "reason": pl.String})
        joined = frame.join(table, on="text", how="left", maintain_order="left")
        bad = joined.filter(pl.col("reason").is_not_null())
        for (reason,), group in bad.group_by("reason", maintain_order=True):
            rejects.extend(str(reason), group.select("line", "text"), _record)
        good = joined.filter(pl.col("reason").is_null() & pl.col("key").is_not_null())
        return good.select(pl.col("line"), pl.col("key").cast(pl.Categorical), "value", "ts_ms", "text").cast(
            RAW_SCHEMA)  # type: ignore[arg-type]

    def _resolve(self, samples: pl.DataFrame, rejects: RejectLog) -> pl.DataFrame:
        """Parse each new series text once; drop (and reject) lines whose series text is invalid.

        Series texts are told apart by their dictionary code, so only codes never seen before are looked at
        as text.
        """
        codes = samples.get_column("key").to_physical().to_numpy()
        if not len(codes):
            return samples
        top = int(codes.max()) + 1
        if len(self._status) < top:
            self._status = np.concatenate([self._status, np.zeros(max(top, 2 * len(self._status)) - len(self._status),
                                                                  dtype=np.int8)])
        if not self._status[codes].all():
            unseen = samples.filter(pl.Series(self._status[codes] == _UNSEEN)).get_column("key").unique()
            for code, key in zip(unseen.to_physical().to_list(), unseen.cast(pl.String).to_list(), strict=True):
                got = self._series.get(key)
                if got is None:
                    got = self._series[key] = _parse_key(key)
                if isinstance(got, str):
                    self._status[code] = _INVALID
                else:
                    self._status[code] = _VALID
                    self._valid[key] = got
        if not (self._status[codes] == _INVALID).any():
            return samples
        bad = {k: v for k, v in self._series.items() if isinstance(v, str)}
        flagged = samples.with_columns(
            reason=pl.col("key").cast(pl.String).replace_strict(bad, default=None, return_dtype=pl.String))
        for line, text, reason in flagged.filter(pl.col("reason").is_not_null()).select(
                "line", "text", "reason").iter_rows():
            rejects.append({"line": line, "record": _record(text), "reason": reason})
        return flagged.filter(pl.col("reason").is_null()).drop("reason")


def _parse_key(key: str) -> Series | str:
    try:
        name, labels, end = parse_series(key)
    except LineError as exc:
        return str(exc)
    if end != len(key):
        return f"unexpected text after {name!r}: {key[end:end + 20]!r}"
    return name, labels


def _flags(data: Buffer) -> tuple[bool, bool]:
    """Whether any line may hold a backslash (escapes) or a carriage return: they switch on per-line checks.

    A memoryview is searched through its underlying object (a memory map or bytes), which is at least as
    large: a false alarm only costs a per-line check.
    """
    raw = data.obj if isinstance(data, memoryview) else data
    if isinstance(raw, (bytes, bytearray, mmap.mmap)):
        return raw.find(b"\\", 0) >= 0, raw.find(b"\r", 0) >= 0
    arr = np.frombuffer(data, dtype=np.uint8)
    return bool((arr == 92).any()), bool((arr == 13).any())


def _ascii(arr: np.ndarray) -> bool:
    """No byte of the block is >= 0x80 (then it is valid UTF-8): one pass over 8-byte words."""
    whole = len(arr) - len(arr) % 8
    high = int(np.bitwise_or.reduce(arr[:whole].view(np.uint64))) if whole else 0
    return not (high & 0x8080808080808080 or (whole < len(arr) and int(arr[whole:].max()) >= 0x80))


def _valid_utf8(block: Buffer) -> bool:
    try:
        codecs.utf_8_decode(block, "strict", True)
    except UnicodeDecodeError:
        return False
    return True


def _empty_samples() -> pl.DataFrame:
    return pl.DataFrame(schema=RAW_SCHEMA)


_NO_SAMPLES = _empty_samples()
_NO_REJECTS = pl.DataFrame(schema=REJECT_SCHEMA)


def _split(frame: pl.DataFrame, first: int, block_flags: tuple[bool, bool]) -> pl.DataFrame:
    """Classify lines (1 comment, 2 fast sample, 3 needs the careful parser, 0 blank) and split fast ones.

    Each line still ends in its newline. The series text ends at the first `"} ` (a quote inside a label
    value is always escaped, and escapes take the careful path) or, without labels, at the first space.
    The value and the optional timestamp follow it, one space apart. Fast lines get their series text as a
    dictionary-encoded `key`.
    """
    has_backslash, has_cr = block_flags
    text = pl.col("text")
    brace, close, space, gap = pl.col("brace"), pl.col("close"), pl.col("space"), pl.col("gap")
    simple = pl.when(brace.is_not_null()).then(close.is_not_null() & (brace < space)).otherwise(space > 0)
    simple = simple & text.str.contains(" # ", literal=True).not_()  # an OpenMetrics exemplar follows
    if has_backslash:
        simple = simple & text.str.contains("\\", literal=True).not_()
    trail = pl.when(text.str.ends_with("\r\n")).then(2).otherwise(1) if has_cr else pl.lit(1)
    kind = (pl.when(pl.col("comment")).then(1)
            .when(pl.col("length") <= 1).then(0)
            .when(simple & pl.col("value").is_not_null() & (gap.is_null() | pl.col("ts_raw").is_not_null())).then(2)
            .otherwise(3).cast(pl.Int8))
    out = (
        frame.lazy()
        .with_columns(brace=text.str.find("{", literal=True), close=text.str.find('"} ', literal=True),
                      space=text.str.find(" ", literal=True), length=text.str.len_bytes().cast(pl.Int64))
        .with_columns(cut=pl.when(brace.is_not_null()).then(close + 2).otherwise(space).cast(pl.Int64))
        .with_columns(tail=text.str.slice(pl.col("cut") + 1),
                      tail_len=pl.col("length") - pl.col("cut") - 1 - trail)
        .with_columns(gap=pl.col("tail").str.find(" ", literal=True).cast(pl.Int64))
        .with_columns(
            value=pl.col("tail").str.head(gap.fill_null(pl.col("tail_len"))).cast(pl.Float64, strict=False),
            ts_raw=pl.col("tail").str.slice(gap + 1, pl.col("tail_len") - gap - 1).cast(pl.Int64, strict=False),
        )
        .with_columns(kind=kind)
        .select(
            pl.int_range(first, first + pl.len(), dtype=pl.Int64).alias("line"), "kind",
            pl.when(pl.col("kind") == 2).then(text.str.head(pl.col("cut"))).cast(pl.Categorical).alias("key"),
            "value",
            pl.when(pl.col("ts_raw").abs() < SECONDS_BELOW).then(pl.col("ts_raw") * 1000)
            .otherwise(pl.col("ts_raw")).alias("ts_ms"),
            "text",
        )
    )
    return out.collect()
