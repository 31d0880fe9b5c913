"""Benchmark tables: CSV rows of closed-loop serving benchmarks, the evidence `replay calibrate --bench` fits.

    pool,isl,osl,concurrency,ttft_ms,tpot_ms[,output_tok_s][,arrivals][,range_ratio,range_style][,num_prompts]
        [,statistic]
    h100-a,1024,128,16,187.5,21.4

One row per (pool, prompt length, output length, concurrency), with the median (or mean) TTFT and TPOT in
milliseconds, as `vllm bench serve --max-concurrency`, SGLang's bench_serving or a vendor's table give them.
The optional columns say how the client ran, so that calibration replays the row the same way (replay.bench):
`arrivals` (staggered, the default, or lockstep: every client starting at once, as a client with an unbounded
request rate does), `range_ratio` with `range_style` (lengths drawn around isl and osl, `vllm bench serve`'s
reading and the default, or up to them, SGLang's bench_serving's; empty or 0 around them: fixed lengths) and
`num_prompts` (the requests the row measured; empty: calibration's own number). `statistic` says which figure
over the row's requests ttft_ms and tpot_ms are: `median`, `mean` or `p99`, as the client prints them all and a
lockstep client's mean TTFT holds its first wave's queued prompts, which its median does not (empty: not said,
compared as a median).
Every value is checked; a bad one is an error naming the file, line and column.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import polars as pl

from canonical.csvtext import csv_records
from canonical.fileread import UnreadableFile, read_text
from replay.bench import ARRIVALS, RANGE_STYLES, STATISTICS, range_problem
from replay.exceptions import BenchTableError

REQUIRED = ("pool", "isl", "osl", "concurrency", "ttft_ms", "tpot_ms")
OPTIONAL = ("output_tok_s", "arrivals", "range_ratio", "range_style", "num_prompts", "statistic")
INTS = {"isl": 0, "osl": 1, "concurrency": 1}
MAX_INT = 2**31 - 1  # token counts and concurrency are stored as 32-bit integers elsewhere
FLOATS = ("ttft_ms", "tpot_ms", "output_tok_s")
SCHEMA = {"line": pl.Int64, "pool": pl.String, "isl": pl.Int64, "osl": pl.Int64, "concurrency": pl.Int64,
          "ttft_ms": pl.Float64, "tpot_ms": pl.Float64, "output_tok_s": pl.Float64, "arrivals": pl.String,
          "range_ratio": pl.Float64, "range_style": pl.String, "num_prompts": pl.Int64, "statistic": pl.String}


def read_bench_table(path: str | Path) -> pl.DataFrame:
    """Read and check a benchmark CSV file."""
    p = Path(path)
    try:
        text = read_text(p, "a CSV table")
    except UnreadableFile as exc:
        raise BenchTableError(str(exc)) from None
    return parse_bench_table(text, str(p))


def _records(text: str, source: str) -> Iterator[tuple[int, list[str]]]:
    """(line, values) of each CSV record; a record the csv module cannot read is an error at its line."""
    return csv_records(text, lambda line, message: BenchTableError(f"{source}:{line}: {message}"))


def parse_bench_table(text: str, source: str = "<bench>") -> pl.DataFrame:
    """Check benchmark CSV text; the frame has a `line` column for later messages."""
    reader = _records(text, source)
    header = next(reader, (1, None))[1]
    if not header:
        raise BenchTableError(f"{source}:1: empty file; expected the header {','.join(REQUIRED)}")
    names = [h.strip() for h in header]
    missing = [c for c in REQUIRED if c not in names]
    if missing:
        raise BenchTableError(f"{source}:1: missing column {', '.join(missing)}; has: {', '.join(names)}")
    unknown = [c for c in names if c not in REQUIRED + OPTIONAL]
    if unknown:
        raise BenchTableError(f"{source}:1: unknown column {', '.join(unknown)}; expected "
                              f"{', '.join(REQUIRED + OPTIONAL)}")
    rows: dict[str, list[object]] = {c: [] for c in SCHEMA}
    for line, values in reader:
        if not any(v.strip() for v in values):
            continue
        if len(values) != len(names):
            raise BenchTableError(f"{source}:{line}: expected {len(names)} values, got {len(values)}")
        cell = dict(zip(names, (v.strip() for v in values), strict=True))
        rows["line"].append(line)
        if not cell["pool"]:
            raise BenchTableError(f"{source}:{line}: column pool: missing pool id")
        rows["pool"].append(cell["pool"])
        for col, least in INTS.items():
            rows[col].append(_int(cell[col], least, source, line, col))
        for col in FLOATS:
            rows[col].append(_float(cell.get(col, ""), source, line, col, required=col in REQUIRED))
        arrivals = cell.get("arrivals", "") or "staggered"
        if arrivals not in ARRIVALS:
            raise BenchTableError(f"{source}:{line}: column arrivals: unknown value {arrivals[:40]!r}; expected "
                                  f"{' or '.join(ARRIVALS)}")
        rows["arrivals"].append(arrivals)
        ratio, style = _range(cell, source, line)
        rows["range_ratio"].append(ratio)
        rows["range_style"].append(style)
        rows["num_prompts"].append(_int(prompts, 1, source, line, "num_prompts")
                                   if (prompts := cell.get("num_prompts", "")) else None)
        statistic = cell.get("statistic", "") or None  # unsaid: compared as a median, with a note where it matters
        if statistic is not None and statistic not in STATISTICS:
            raise BenchTableError(f"{source}:{line}: column statistic: unknown value {statistic[:40]!r}; expected "
                                  f"one of {', '.join(STATISTICS)}")
        rows["statistic"].append(statistic)
    if not rows["line"]:
        raise BenchTableError(f"{source}: no benchmark rows after the header")
    return pl.DataFrame(rows, schema=SCHEMA)


def _range(cell: dict[str, str], source: str, line: int) -> tuple[float, str]:
    """The row's random range ratio and how its client reads it: (0, around) when it gives none."""
    style = cell.get("range_style", "") or RANGE_STYLES[0]
    if style not in RANGE_STYLES:
        raise BenchTableError(f"{source}:{line}: column range_style: unknown value {style[:40]!r}; expected "
                              f"{' or '.join(RANGE_STYLES)}")
    text = cell.get("range_ratio", "")
    if not text:
        return 0.0, style
    try:
        ratio = float(text)
    except ValueError:
        raise BenchTableError(f"{source}:{line}: column range_ratio: expected a number, got {text[:40]!r}") from None
    if (problem := range_problem(ratio, style)) is not None:
        raise BenchTableError(f"{source}:{line}: column range_ratio: expected {problem} (range_style {style})")
    return ratio, style


def _int(text: str, least: int, source: str, line: int, col: str) -> int:
    try:
        value = int(text)
    except ValueError:  # not a number, or one of thousands of digits
        raise BenchTableError(f"{source}:{line}: column {col}: expected a whole number, got {text[:40]!r}") from None
    if value < least:
        raise BenchTableError(f"{source}:{line}: column {col}: must be >= {least}, got {value}")
    if value > MAX_INT:
        raise BenchTableError(f"{source}:{line}: column {col}: must be <= {MAX_INT}, got {text[:40]}")
    return value


def _float(text: str, source: str, line: int, col: str, *, required: bool) -> float | None:
    if not text:
        if required:
            raise BenchTableError(f"{source}:{line}: column {col}: missing value")
        return None
    try:
        value = float(text)
    except ValueError:
        raise BenchTableError(f"{source}:{line}: column {col}: expected a number, got {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise BenchTableError(f"{source}:{line}: column {col}: must be a positive finite number, got {text}")
    return value
