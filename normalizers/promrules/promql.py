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
    """An fnmatch pattern (the registry's node_pattern) as an anchored RE2 regex."""
    out, i = [], 0
    while i < len(pattern):
        c = pattern[i]
        if c == "*":
            out.append(".*")
        elif c == "?":
            out.append(".")
        elif c == "[" and (end := pattern.find("]", i + 2 if pattern[i + 1:i + 2] in ("!", "]") else i + 1)) > 0:
            body = pattern[i + 1:end]
            body = "^" + body[1:] if body.startswith("!") else body
            out.append("[" + body.replace("\\", "\\\\") + "]")
            i = end
        else:
            out.append(literal(c))
        i += 1
    return "".join(out)


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
