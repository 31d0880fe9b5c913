"""One exposition line read the way each format's grammar has it, for `lint`: a sample, or the rule it breaks.

OpenMetrics 1.0 is read by its ABNF: single spaces, no trailing comma or blanks in a label set, numbers and
timestamps as `realnumber`, an optional exemplar ` # {labels} value [timestamp]`. The Prometheus text format
0.0.4 is read as ingest reads it (`textformat`: blanks and tabs between tokens, a trailing comma), with an
integer millisecond timestamp and no exemplar. A backslash before any character but `\\`, `"` or `n` is kept as
written in both, as their reference parsers do.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from normalizers.textformat import LineError, parse_series, parse_value

NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
LABEL = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
REAL = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
OM_NUMBER = re.compile(rf"{REAL.pattern}|[+-]?(?i:inf(?:inity)?)|(?i:nan)")
PROM_TIMESTAMP = re.compile(r"-?\d+")
EXEMPLAR_MAX_CHARS = 128
_ESCAPES = {"\\": "\\", '"': '"', "n": "\n"}


class Bad(ValueError):
    """A line that breaks a rule: the rule's name and what is wrong."""

    def __init__(self, rule: str, message: str):
        super().__init__(message)
        self.rule = rule


@dataclass(frozen=True)
class Sample:
    """One sample line as written: name, labels, value (and its text), timestamp text, exemplar."""

    name: str
    labels: dict[str, str]
    value: float
    value_text: str
    ts_text: str | None = None
    exemplar: bool = False

    @property
    def ts(self) -> float | None:
        """The timestamp as a number, in the unit written (seconds in OpenMetrics, ms in Prometheus text)."""
        return None if self.ts_text is None else float(self.ts_text)


def _value(text: str, i: int, label: str) -> tuple[str, int]:
    """A quoted label value from just after its opening quote; (value, index after the closing quote)."""
    out: list[str] = []
    while i < len(text):
        ch = text[i]
        if ch == '"':
            return "".join(out), i + 1
        if ch == "\\" and i + 1 < len(text):
            out.append(_ESCAPES.get(text[i + 1], text[i:i + 2]))
            i += 2
            continue
        out.append(ch)
        i += 1
    raise Bad("syntax", f"the value of label {label!r} has no closing quote")


def om_labels(text: str, i: int, rule: str = "syntax") -> tuple[dict[str, str], int]:
    """An OpenMetrics label set starting at its '{': `{a="x",b="y"}`, nothing between the tokens."""
    labels: dict[str, str] = {}
    i += 1
    if text.startswith("}", i):
        return labels, i + 1
    while True:
        m = LABEL.match(text, i)
        if m is None:
            shown = text[i:i + 12] or "the end of the line"
            raise Bad(rule, f"expected a label name at column {i + 1}, found {shown!r}"
                            + (" (a trailing comma?)" if text.startswith("}", i) else ""))
        label = m.group()
        _reserved(label)
        if not text.startswith('="', m.end()):
            raise Bad(rule, f"expected '=\"' right after label name {label!r} (no blanks in OpenMetrics)")
        value, i = _value(text, m.end() + 2, label)
        if label in labels:
            raise Bad("label", f"label {label!r} appears twice")
        labels[label] = value
        if text.startswith(",", i):
            i += 1
        elif text.startswith("}", i):
            return labels, i + 1
        else:
            raise Bad(rule, f"expected ',' or '}}' after the value of label {label!r}, found {text[i:i + 12]!r}")


def _reserved(label: str) -> None:
    if label.startswith("__"):
        raise Bad("label", f"label name {label!r}: names that begin with '__' are reserved")


def _number(raw: str, rule: str, what: str, pattern: re.Pattern[str] = OM_NUMBER) -> float:
    if not pattern.fullmatch(raw):
        raise Bad(rule, f"{what} {raw[:40]!r} is not a number as OpenMetrics writes one")
    return float(raw)


def om_sample(text: str) -> Sample:
    """Read one OpenMetrics sample line (without its newline)."""
    m = NAME.match(text)
    if m is None:
        raise Bad("syntax", f"a sample line starts with a metric name, not {text[:20]!r}")
    name, i = m.group(), m.end()
    labels: dict[str, str] = {}
    if text.startswith("{", i):
        labels, i = om_labels(text, i)
    if not text.startswith(" ", i):
        raise Bad("syntax", f"expected one space and a value after {text[:i][-40:]!r}")
    head, sep, exemplar = text[i + 1:].partition(" # ")
    fields = head.split(" ")
    if "" in fields or len(fields) > 2:
        raise Bad("syntax", "value and timestamp are separated by exactly one space, and nothing follows them "
                            "but an exemplar")
    value = _number(fields[0], "value", "value")
    ts = fields[1] if len(fields) == 2 else None
    if ts is not None:
        if OM_NUMBER.fullmatch(ts) and not REAL.fullmatch(ts):
            raise Bad("timestamp", f"timestamp {ts!r} is not a finite number")
        _number(ts, "timestamp", "timestamp", REAL)
    if sep:
        _exemplar(exemplar)
    return Sample(name, labels, value, fields[0], ts, bool(sep))


def _exemplar(text: str) -> None:
    """Check an exemplar: `{labels} value [timestamp]`, its labels at most 128 characters."""
    if not text.startswith("{"):
        raise Bad("exemplar", "an exemplar is '# {labels} value [timestamp]'")
    labels, i = om_labels(text, 0, "exemplar")
    size = sum(len(k) + len(v) for k, v in labels.items())
    if size > EXEMPLAR_MAX_CHARS:
        raise Bad("exemplar", f"exemplar labels are {size} characters; at most {EXEMPLAR_MAX_CHARS}")
    fields = text[i:].split(" ")
    if fields[0] != "" or len(fields) not in (2, 3) or "" in fields[1:]:
        raise Bad("exemplar", "an exemplar's labels are followed by one space, a value and an optional timestamp")
    _number(fields[1], "exemplar", "exemplar value")
    if len(fields) == 3:
        _number(fields[2], "exemplar", "exemplar timestamp", REAL)


def prom_sample(text: str) -> Sample:
    """Read one Prometheus text format sample line (without its newline), leading blanks allowed."""
    text = text.lstrip(" \t")
    try:
        name, labels, i = parse_series(text)
    except LineError as exc:
        raise Bad("label" if str(exc).startswith("duplicate label") else "syntax", str(exc)) from None
    for label in labels:
        _reserved(label)
    if i < len(text) and text[i] not in " \t":
        raise Bad("syntax", f"unexpected {text[i]!r} after metric name {name!r}")
    if " # " in text[i:] or "\t# " in text[i:]:
        raise Bad("exemplar", "exemplars are OpenMetrics only (this input has no '# EOF' line)")
    fields = text[i:].split()
    if not fields:
        raise Bad("syntax", f"missing value after {name!r}")
    if len(fields) > 2:
        raise Bad("syntax", f"unexpected text after the timestamp: {' '.join(fields[2:])[:40]!r}")
    try:
        value = parse_value(fields[0])
    except LineError as exc:
        raise Bad("value", str(exc)) from None
    if len(fields) == 2 and not PROM_TIMESTAMP.fullmatch(fields[1]):
        raise Bad("timestamp", f"timestamp {fields[1][:40]!r} is not an integer of milliseconds")
    return Sample(name, labels, value, fields[0], fields[1] if len(fields) == 2 else None)
