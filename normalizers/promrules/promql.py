"""Small PromQL writers: string literals, numbers, regexes, selectors and label_replace."""

from __future__ import annotations

import json
import math
import re

_LABEL = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
_BARE_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
_RE2_SPECIAL = set("\\.+*?()|[]{}^$")


def string(text: str) -> str:
    """A PromQL string literal; JSON's escapes are a subset of the Go escapes PromQL reads."""
    return json.dumps(text)


def number(value: float) -> str:
    """A number literal that parses back to exactly the same float."""
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value.is_integer() and abs(value) < 2**53:
        return str(int(value))
    return repr(value)


def literal(text: str) -> str:
    """A regex matching exactly `text` (RE2 syntax, as Prometheus anchors it)."""
    return "".join(f"\\{c}" if c in _RE2_SPECIAL else c for c in text)


def alternatives(texts: list[str] | tuple[str, ...]) -> str:
    """A regex matching any of the exact texts."""
    return "|".join(literal(t) for t in texts)


def glob(pattern: str) -> str:
    """An fnmatch pattern (the registry's node_pattern) as an anchored RE2 regex, bracket sets included."""
    out, i, n = [], 0, len(pattern)
    while i < n:
        c = pattern[i]
        i += 1
        if c == "*":
            out.append(".*")
        elif c == "?":
            out.append(".")
        elif c == "[":
            j = i + (i < n and pattern[i] == "!")
            j += j < n and pattern[j] == "]"  # a ']' first in the set is a member, not its end
            while j < n and pattern[j] != "]":
                j += 1
            if j >= n:
                out.append("\\[")
                continue
            out.append(_bracket(pattern[i:j]))
            i = j + 1
        else:
            out.append(literal(c))
    return "".join(out)


def _bracket(body: str) -> str:
    """One fnmatch set ('!' negates; 'a-z' is a range, and a reversed range is empty) as a regex class."""
    negate = body.startswith("!")
    body = body[1:] if negate else body
    items, k = [], 0
    while k < len(body):
        if k + 2 < len(body) and body[k + 1] == "-":
            lo, hi = body[k], body[k + 2]
            k += 3
            if lo <= hi:
                items.append(f"{_member(lo)}-{_member(hi)}")
        else:
            items.append(_member(body[k]))
            k += 1
    if not items:
        return "." if negate else "[^\\s\\S]"  # an empty set matches nothing; negated, any one character
    return ("[^" if negate else "[") + "".join(items) + "]"


def _member(c: str) -> str:
    return f"\\{c}" if c in "\\]^[-" else c


def replacement(text: str) -> str:
    """A label_replace replacement that is taken literally ('$' would start a group reference)."""
    return text.replace("$", "$$")


def valid_label(name: str) -> bool:
    """True for a label name Prometheus accepts."""
    return bool(_LABEL.match(name))


def selector(names: tuple[str, ...], matchers: tuple[str, ...] = ()) -> str:
    """An instant vector selector of one metric name (or any of several), with extra label matchers."""
    if len(names) == 1 and _BARE_NAME.match(names[0]):
        return f"{names[0]}{{{', '.join(matchers)}}}" if matchers else names[0]
    name = f"__name__=~{string(alternatives(names))}" if len(names) > 1 else f"__name__={string(names[0])}"
    return "{" + ", ".join((name, *matchers)) + "}"


def matcher(label: str, op: str, value: str) -> str:
    """One label matcher such as gpu_id="0" or finished_reason=~"stop|length"."""
    return f"{label}{op}{string(value)}"


def label_replace(expr: str, dst: str, repl: str, src: str, regex: str) -> str:
    """label_replace(expr, dst, repl, src, regex)."""
    return f"label_replace({expr}, {string(dst)}, {string(repl)}, {string(src)}, {string(regex)})"


def label_join(expr: str, dst: str, sep: str, srcs: tuple[str, ...]) -> str:
    """label_join(expr, dst, sep, src...)."""
    return f"label_join({expr}, {string(dst)}, {string(sep)}, {', '.join(string(s) for s in srcs)})"


def max_by(labels: tuple[str, ...], expr: str) -> str:
    """One series per label set: max by (labels) (expr)."""
    return f"max by ({', '.join(labels)}) ({expr})"
