"""Careful per-line parsing of the Prometheus text format and OpenMetrics: the slow path for odd lines.

The vectorized parser in `exposition` handles ordinary lines; anything it is unsure of (escapes, exemplars,
float timestamps, odd spacing) comes here, and so does each distinct series text once, to read its labels.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

_NAME_START = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_:")
_NAME_CHARS = _NAME_START | frozenset("0123456789")
_LABEL_START = _NAME_START - {":"}
_LABEL_CHARS = _NAME_CHARS - {":"}
_SPACE = " \t"
_ESCAPES = {"\\": "\\", '"': '"', "n": "\n"}
_VALUE = re.compile(r"^[+-]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|(?i:inf(?:inity)?|nan))$")
_INT = re.compile(r"^-?\d+$")
_SIMPLE_SERIES = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\{([^\\\n]*)\}")
_SIMPLE_PAIR = re.compile(r'[ \t]*([a-zA-Z_][a-zA-Z0-9_]*)[ \t]*=[ \t]*"([^"]*)"[ \t]*(?:,[ \t]*|$)')
_FLOAT = re.compile(r"^-?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?$")

# Exposition timestamps are ms in the Prometheus text format and (float) seconds in OpenMetrics; some
# exporter fixtures also write whole seconds. An integer below 1e11 would be a ms time before 1973-03-03,
# so it is read as seconds; a fractional or exponent form is always seconds.
SECONDS_BELOW = 100_000_000_000


class LineError(ValueError):
    """A line that is not valid exposition text; the message is the reject reason."""


@dataclass(frozen=True)
class Line:
    """One parsed sample line."""

    name: str
    labels: dict[str, str]
    value: float
    ts_ms: int | None


def parse_value(raw: str) -> float:
    """A sample value: a decimal float, NaN or +/-Inf (Go ParseFloat spellings, no '_' separators)."""
    if not _VALUE.match(raw):
        raise LineError(f"bad value {raw[:40]!r}; expected a number, NaN or +Inf")
    return float(raw)


def parse_timestamp(raw: str) -> int:
    """A timestamp in epoch ms (integers below 1e11 and fractional values are seconds)."""
    if _INT.match(raw):
        ts = int(raw)
        if abs(ts) >= 2**63:
            raise LineError(f"bad timestamp {raw[:40]!r}; out of range")
        return ts * 1000 if abs(ts) < SECONDS_BELOW else ts
    if _FLOAT.match(raw):
        seconds = float(raw)
        if not math.isfinite(seconds) or abs(seconds) >= 2**53:
            raise LineError(f"bad timestamp {raw[:40]!r}; out of range")
        return round(seconds * 1000)
    raise LineError(f"bad timestamp {raw[:40]!r}; expected epoch milliseconds or seconds")


def _name(text: str, i: int, chars: frozenset[str], start: frozenset[str]) -> int:
    """End index of the identifier starting at i (i itself when there is none)."""
    if i >= len(text) or text[i] not in start:
        return i
    j = i + 1
    while j < len(text) and text[j] in chars:
        j += 1
    return j


def _skip(text: str, i: int) -> int:
    while i < len(text) and text[i] in _SPACE:
        i += 1
    return i


def _label_value(text: str, i: int, label: str) -> tuple[str, int]:
    """Read a quoted label value starting after the opening quote; return (value, index after quote)."""
    out: list[str] = []
    n = len(text)
    while i < n:
        ch = text[i]
        if ch == '"':
            return "".join(out), i + 1
        if ch == "\\":
            if i + 1 >= n:
                break
            esc = text[i + 1]
            # any other escape is read as written, backslash and all (as both formats' reference parsers do)
            out.append(_ESCAPES.get(esc, text[i:i + 2]))
            i += 2
            continue
        if ch == "\n":
            break
        out.append(ch)
        i += 1
    raise LineError(f"unterminated value of label {label!r} (line truncated?)")


def parse_labels(text: str, i: int) -> tuple[dict[str, str], int]:
    """Parse `{a="x", b="y"}` starting at the '{'; return labels and the index after '}'."""
    labels: dict[str, str] = {}
    i = _skip(text, i + 1)
    while True:
        if i >= len(text):
            raise LineError("unterminated label set: no closing '}' (line truncated?)")
        if text[i] == "}":
            return labels, i + 1
        end = _name(text, i, _LABEL_CHARS, _LABEL_START)
        if end == i:
            raise LineError(f"bad label name at column {i + 1}: {text[i:i + 20]!r}")
        label = text[i:end]
        i = _skip(text, end)
        if i >= len(text) or text[i] != "=":
            raise LineError(f"expected '=' after label name {label!r}")
        i = _skip(text, i + 1)
        if i >= len(text) or text[i] != '"':
            raise LineError(f"expected '\"' to open the value of label {label!r}")
        value, i = _label_value(text, i + 1, label)
        if label in labels:
            raise LineError(f"duplicate label {label!r}")
        labels[label] = value
        i = _skip(text, i)
        if i < len(text) and text[i] == ",":
            i = _skip(text, i + 1)
        elif i < len(text) and text[i] != "}":
            raise LineError(f"expected ',' or '}}' after the value of label {label!r}")


def _simple_series(text: str) -> tuple[str, dict[str, str]] | None:
    """Regex reading of a whole `name{a="x",b="y"}` without escapes; None when anything is unusual."""
    m = _SIMPLE_SERIES.fullmatch(text)
    if m is None:
        return None
    body, pos, labels = m.group(2), 0, {}
    while pos < len(body):
        pair = _SIMPLE_PAIR.match(body, pos)
        if pair is None or pair.group(1) in labels:
            return None
        labels[pair.group(1)] = pair.group(2)
        pos = pair.end()
    return m.group(1), labels


def parse_series(text: str) -> tuple[str, dict[str, str], int]:
    """Parse `name{labels}` at the start of text; return name, labels and the index after them."""
    simple = _simple_series(text) if text.endswith("}") else None
    if simple is not None:
        return simple[0], simple[1], len(text)
    end = _name(text, 0, _NAME_CHARS, _NAME_START)
    if end == 0:
        shown = text[:20].rstrip("\n")
        raise LineError(f"bad metric name: {shown!r} does not start with [a-zA-Z_:]")
    name = text[:end]
    if end < len(text) and text[end] == "{":
        labels, end = parse_labels(text, end)
        return name, labels, end
    return name, {}, end


def parse_line(text: str) -> Line:
    """Parse one sample line (no trailing newline) or raise LineError with the reason."""
    name, labels, i = parse_series(text)
    if i < len(text) and text[i] not in _SPACE:
        raise LineError(f"unexpected {text[i]!r} after metric name {name!r}")
    rest = text[i:]
    exemplar = rest.find(" # ")
    if exemplar >= 0:  # OpenMetrics exemplar: kept out of the sample
        rest = rest[:exemplar]
    fields = rest.split()
    if not fields:
        raise LineError(f"missing value after {name!r}")
    if len(fields) > 2:
        raise LineError(f"unexpected text after the timestamp: {' '.join(fields[2:])[:40]!r}")
    value = parse_value(fields[0])
    ts = parse_timestamp(fields[1]) if len(fields) == 2 else None
    return Line(name, labels, value, ts)


def escape_label_value(value: str) -> str:
    """Escape a label value for exposition text."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def render_series(name: str, labels: dict[str, str]) -> str:
    """Exposition text of a series with labels sorted: a stable key for equal label sets."""
    if not labels:
        return name
    body = ",".join(f'{k}="{escape_label_value(v)}"' for k, v in sorted(labels.items()))
    return f"{name}{{{body}}}"
