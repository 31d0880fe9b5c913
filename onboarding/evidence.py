"""One loader per evidence file type: CSV text in, checked Polars frame out, or an EvidenceError with line/column.

    operators    op,max_abs_err,tol                  one row per operator, errors against the reference device
    precision    step,grad_norm[,loss,...]           a short training run's metrics; nan/inf are kept for the gate
    parallelism  devices,mfu                         measured model FLOPs utilization per scale-out point,
                 or the JSON report of `hetpool plan --json` (onboarding.plan_report)
    loss curve   step,loss                           baseline and candidate of the regression item
    benchmark    pool,isl,osl,concurrency,ttft_ms,tpot_ms   the `replay calibrate --bench` table
    multimodal   modality,requests,errors,ttft_p50_ms        a vision-language model's service, per modality
                 (text, image): the model loaded and the service started, then requests sent and answered
    metrics      the JSON report of `hetpool check --json` (onboarding.check_report)
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator

import polars as pl

from canonical.csvtext import csv_records
from onboarding.check_report import parse_families
from onboarding.exceptions import EvidenceError
from onboarding.plan_report import looks_like_plan, parse_plan_report
from replay.benchtable import parse_bench_table
from replay.exceptions import BenchTableError

# A value may be nan or inf in a run's metrics (that is what the precision gate looks for), never elsewhere.
_NON_FINITE = {"nan", "+nan", "-nan", "inf", "+inf", "-inf", "infinity", "+infinity", "-infinity"}


Rows = list[tuple[int, list[str]]]  # (line, values)


def _records(text: str, source: str) -> Iterator[tuple[int, list[str]]]:
    """(line, values) of each CSV record; a record the csv module cannot read is an EvidenceError at its line."""
    return csv_records(text, lambda line, message: EvidenceError(source, line, None, message))


def _table(text: str, source: str, required: tuple[str, ...], *, extra: bool = False) -> tuple[list[str], Rows]:
    reader = _records(text, source)
    header = next(reader, (1, None))[1]
    if not header or not any(h.strip() for h in header):
        raise EvidenceError(source, 1, 1, f"empty file; expected the header {','.join(required)}")
    names = [h.strip() for h in header]
    for col, name in enumerate(names, 1):
        if names.index(name) != col - 1:
            raise EvidenceError(source, 1, col, f"duplicate column {_quote(name)}")
        if name not in required and not extra:
            raise EvidenceError(source, 1, col, f"unknown column {_quote(name)}; expected {','.join(required)}")
    missing = [c for c in required if c not in names]
    if missing:
        raise EvidenceError(source, 1, None, f"missing column {', '.join(missing)}; has: {_names(names)}")
    rows = []
    for line, values in reader:
        if not any(v.strip() for v in values):
            continue
        if len(values) != len(names):
            col = min(len(values), len(names)) + 1
            raise EvidenceError(source, line, col, f"expected {len(names)} values, got {len(values)}")
        rows.append((line, [v.strip() for v in values]))
    if not rows:
        raise EvidenceError(source, None, None, "no rows after the header")
    return names, rows


def _number(text: str, source: str, line: int, col: int, name: str, *, finite: bool = True,
            least: float | None = None) -> float:
    try:
        value = float(text)
    except ValueError:
        raise EvidenceError(source, line, col, f"column {name}: expected a number, got {_quote(text)}") from None
    if finite and not math.isfinite(value):
        raise EvidenceError(source, line, col, f"column {name}: expected a finite number, got {_quote(text)}")
    if math.isfinite(value) and least is not None and value < least:
        raise EvidenceError(source, line, col, f"column {name}: must be >= {least:g}, got {_short(text)}")
    return value


def _frame(text: str, source: str, required: tuple[str, ...], kinds: dict[str, Callable[..., object]],
           *, extra: bool = False) -> pl.DataFrame:
    names, rows = _table(text, source, required, extra=extra)
    out: dict[str, list[object]] = {"line": [], **{n: [] for n in names}}
    for line, values in rows:
        out["line"].append(line)
        for col, (name, value) in enumerate(zip(names, values, strict=True), 1):
            out[name].append(kinds.get(name, kinds["*"])(value, source, line, col, name))
    return pl.DataFrame(out)


def _text(value: str, source: str, line: int, col: int, name: str) -> str:
    if not value:
        raise EvidenceError(source, line, col, f"column {name}: missing value")
    return value


MAX_WHOLE = 2**31 - 1  # steps and device counts; a larger one is a corrupt file, and would not fit a column


def _whole(value: str, source: str, line: int, col: int, name: str, least: int) -> int:
    # ASCII digits only: str.isdigit() also accepts superscripts that int() refuses
    if not (value.isascii() and value.isdigit()) or (len(value) < 4 and int(value) < least):
        raise EvidenceError(source, line, col,
                            f"column {name}: expected a whole number >= {least}, got {_quote(value)}")
    if len(value.lstrip("0")) > 10 or int(value) > MAX_WHOLE:  # thousands of digits are too many for int()
        raise EvidenceError(source, line, col, f"column {name}: must be <= {MAX_WHOLE}, got {_short(value)}")
    return int(value)


def _step(value: str, source: str, line: int, col: int, name: str) -> int:
    return _whole(value, source, line, col, name, 0)


def parse_operators(text: str, source: str = "<operators>") -> pl.DataFrame:
    """Operator alignment: op, max_abs_err, tol (both >= 0)."""
    num = lambda v, s, li, c, n: _number(v, s, li, c, n, least=0)  # noqa: E731
    return _frame(text, source, ("op", "max_abs_err", "tol"), {"op": _text, "*": num})


def parse_precision(text: str, source: str = "<precision>") -> pl.DataFrame:
    """A short run's metrics: step, grad_norm and any other numeric columns; nan and inf stay in for the gate."""
    def metric(v: str, s: str, li: int, c: int, n: str) -> float:
        return float(v) if v.lower() in _NON_FINITE else _number(v, s, li, c, n)
    return _frame(text, source, ("step", "grad_norm"), {"step": _step, "*": metric}, extra=True)


def parse_parallelism(text: str, source: str = "<parallelism>") -> pl.DataFrame:
    """Measured MFU per scale-out point: devices (>= 1), mfu (0 to 1); or a plan report (plan_report)."""
    if looks_like_plan(text):
        return parse_plan_report(text, source)

    def devices(v: str, s: str, li: int, c: int, n: str) -> int:
        return _whole(v, s, li, c, n, 1)

    def mfu(v: str, s: str, li: int, c: int, n: str) -> float:
        value = _number(v, s, li, c, n, least=0)
        if value > 1:
            raise EvidenceError(s, li, c, f"column {n}: a utilization must be <= 1, got {v}")
        return value
    return _frame(text, source, ("devices", "mfu"), {"devices": devices, "*": mfu})


def parse_loss_curve(text: str, source: str = "<loss curve>") -> pl.DataFrame:
    """A loss curve: step (unique, whole), loss (finite)."""
    frame = _frame(text, source, ("step", "loss"), {"step": _step, "*": _number})
    dup = frame.filter(~pl.col("step").is_first_distinct())
    if dup.height:
        raise EvidenceError(source, int(dup["line"][0]), 1, f"column step: step {dup['step'][0]} appears twice")
    return frame


def parse_benchmark(text: str, source: str = "<benchmark>") -> pl.DataFrame:
    """A benchmark table in the `replay calibrate --bench` format."""
    try:
        return parse_bench_table(text, source)
    except BenchTableError as exc:
        # its messages read "source:line: column name: ..."; give the column's number as the other loaders do
        found = re.match(r"(\d+): (?:column (\w+): )?(.*)", str(exc).removeprefix(f"{source}:"))
        if not found:
            raise EvidenceError(source, None, None, str(exc).removeprefix(f"{source}:").strip()) from None
        header = [h.strip() for h in text.lstrip("\ufeff").splitlines()[0].split(",")] if text.strip() else []
        name = found.group(2)
        col = header.index(name) + 1 if name in header else None
        message = f"column {name}: {found.group(3)}" if name else found.group(3)
        raise EvidenceError(source, int(found.group(1)), col, message) from None


MODALITIES = ("text", "image")


def parse_multimodal(text: str, source: str = "<multimodal>") -> pl.DataFrame:
    """Requests served per modality: modality (text or image, each once), requests and errors (whole, errors at most
    the requests), ttft_p50_ms (>= 0)."""
    def modality(v: str, s: str, li: int, c: int, n: str) -> str:
        if v not in MODALITIES:
            raise EvidenceError(s, li, c, f"column {n}: expected one of {', '.join(MODALITIES)}, got {_quote(v)}")
        return v

    def count(v: str, s: str, li: int, c: int, n: str) -> int:
        return _whole(v, s, li, c, n, 0)

    frame = _frame(text, source, ("modality", "requests", "errors", "ttft_p50_ms"),
                   {"modality": modality, "requests": count, "errors": count,
                    "*": lambda v, s, li, c, n: _number(v, s, li, c, n, least=0)})
    dup = frame.filter(~pl.col("modality").is_first_distinct())
    if dup.height:
        raise EvidenceError(source, int(dup["line"][0]), 1, f"column modality: {dup['modality'][0]} appears twice")
    over = frame.filter(pl.col("errors") > pl.col("requests"))
    if over.height:
        header = [h.strip() for h in text.lstrip("\ufeff").splitlines()[0].split(",")]
        raise EvidenceError(source, int(over["line"][0]), header.index("errors") + 1,
                            f"column errors: {over['errors'][0]} errors of {over['requests'][0]} requests")
    return frame


# The loader of each (item, role); the benchmark table's own loader names the column by name, not number.
LOADERS: dict[str, Callable[[str, str], pl.DataFrame]] = {
    "operators": parse_operators, "precision": parse_precision, "parallelism": parse_parallelism,
    "regression": parse_loss_curve, "benchmark": parse_benchmark, "metrics": parse_families,
    "multimodal": parse_multimodal,
}


def parse_evidence(item: str, text: str, source: str) -> pl.DataFrame:
    """Parse the evidence file of a checklist item with its loader."""
    try:
        loader = LOADERS[item]
    except KeyError:
        raise EvidenceError(source, None, None, f"checklist item {item!r} takes no evidence file; "
                                                f"files go to: {', '.join(LOADERS)}") from None
    return loader(text, source)


QUOTED = 40  # characters of a file's own text an error quotes at most


def _short(text: str) -> str:
    """A field of the file as an error shows it: its first QUOTED characters, never the rest of the file."""
    return text[:QUOTED] + "…" if len(text) > QUOTED else text


def _quote(text: str) -> str:
    """A field of the file quoted, cut as _short cuts it."""
    return repr(_short(text))


def _names(names: list[str]) -> str:
    """A header's columns as an error lists them: a few, each quoted short."""
    shown = [_quote(n) if len(n) > QUOTED or not n.isprintable() else n for n in names[:8]]
    return ", ".join(shown) + (f" and {len(names) - 8} more" if len(names) > 8 else "")
