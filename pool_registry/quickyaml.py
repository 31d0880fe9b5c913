"""A fast reader of the plain YAML (and JSON) that registries are written in: values only, no positions.

It reads block mappings and lists, one-line flow collections, plain and one-line quoted scalars and comments,
and types every plain scalar exactly as PyYAML's safe loader does. Anything else (anchors, tags, block scalars,
multi-line scalars or flows, escapes, duplicate keys, and every syntax error) raises Unsupported, and the caller
reads the text with PyYAML, whose positions and messages the errors quote. Mapping keys stay their raw text, as
the positioned reader takes them."""

from __future__ import annotations

import json
import re
from typing import Any

from yaml.constructor import SafeConstructor
from yaml.nodes import ScalarNode
from yaml.resolver import Resolver


class Unsupported(Exception):
    """Text outside the subset this reader handles; the full YAML reader reads it."""


# what PyYAML's reader refuses in a stream, and what it takes for a line break or a byte-order mark
_NON_PRINTABLE = re.compile("[^\x0a\x20-\x7e\xa0-\u2027\u202a-\ud7ff\ue000-\ufefe\uff00-\ufffd\U00010000-\U0010ffff]")
_BAD_PLAIN_START = frozenset("?:,[]{}#&*!|>'\"%@`")
_BAD_KEY_CHARS = re.compile(r"[\[\]{},]| #")
_FLOW_PLAIN = re.compile(r"(?:-(?=[^\s,\[\]{}])|[^\s,?\[\]{}#:'\"&*!|>%@`-])[^,?\[\]{}#:]*")
_LINES = re.compile(r"^( *)([^ #\n](?:[^\n]*[^ \n])?) *$", re.M)  # (indent, content) of each line with content
_MARKERS = re.compile(r"^(?:---|\.\.\.|%).*$", re.M)
_SIMPLE_PAIR = re.compile(r"([A-Za-z0-9_][A-Za-z0-9_.-]{0,200}) *:(?: +([A-Za-z0-9_.+/~][A-Za-z0-9_.+/~ -]*))?$")
_SIMPLE_KEY = re.compile(r"([A-Za-z0-9_][A-Za-z0-9_.-]{0,200}) *:(?: +|$)")  # most keys: no question to ask
_YAML_FLOAT = re.compile(r"[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?")
_JSON_SURROGATE = re.compile(r"\\u[dD][89abAB]")
_BUILD = {
    "tag:yaml.org,2002:int": SafeConstructor.construct_yaml_int,
    "tag:yaml.org,2002:float": SafeConstructor.construct_yaml_float,
    "tag:yaml.org,2002:bool": SafeConstructor.construct_yaml_bool,
    "tag:yaml.org,2002:str": SafeConstructor.construct_yaml_str,
    "tag:yaml.org,2002:null": SafeConstructor.construct_yaml_null,
    "tag:yaml.org,2002:timestamp": SafeConstructor.construct_yaml_timestamp,
}
_RESOLVER = Resolver()
_CONSTRUCTOR = SafeConstructor()
_MISS = object()
_seen: dict[str, Any] = {}  # plain text -> value: a registry repeats most of its values; all of them immutable


def plain_value(text: str) -> Any:
    """The value PyYAML's safe loader gives an unquoted scalar."""
    value = _seen.get(text, _MISS)
    if value is _MISS:
        tag = _RESOLVER.resolve(ScalarNode, text, (True, False))
        build = _BUILD.get(tag)
        if build is None:  # '<<' and '=' resolve to tags the registry has no use for
            raise Unsupported(text)
        try:
            value = build(_CONSTRUCTOR, ScalarNode(tag, text))
        except (ValueError, OverflowError):  # an integer too long to read: the positioned reader says where
            raise Unsupported("a number too long to read") from None
        if len(_seen) < 100_000:
            _seen[text] = value
    return value


def parse(text: str) -> Any:
    """The document's value, or Unsupported; its containers may be shared within it, so read them only."""
    if text.lstrip()[:1] == "{":
        return parse_json(text)
    if not _printable(text):
        raise Unsupported("tabs, carriage returns or unprintable characters")
    has_marker = text.startswith(("---", "...", "%")) or "\n---" in text or "\n..." in text or "\n%" in text
    marker = _MARKERS.search(text) if has_marker else None
    if marker is not None:
        if marker.group() != "---" or marker.start() != _first_content(text):
            raise Unsupported("documents and directives")
        text = text[marker.end():]
    # an indent stays its run of spaces: one is deeper than another exactly when it compares greater
    lines: list[tuple[str, str]] = _LINES.findall(text)
    if not lines:
        raise Unsupported("an empty document")
    blocks = _Blocks(lines)
    try:
        value = blocks.node(lines[0][0])
    except RecursionError:
        raise Unsupported("nesting hundreds of levels deep") from None
    if blocks.i != len(lines):
        raise Unsupported("text after the document's top node")
    return value


def _printable(text: str) -> bool:
    """No character PyYAML refuses or reads as a line break, tab or carriage return (which this reader leaves)."""
    if text.isascii():  # most files: a byte table is many times faster than the class of every range
        return not text.encode("ascii").translate(None, _ASCII_PRINTABLE)
    return _NON_PRINTABLE.search(text) is None


_ASCII_PRINTABLE = bytes([0x0A, *range(0x20, 0x7F)])


def _first_content(text: str) -> int:
    """Where the first line that is not blank or a comment starts."""
    match = _LINES.search(text)
    return match.start(2) if match else len(text)


def parse_json(text: str) -> Any:
    """A JSON document as PyYAML would read it; numbers or escapes YAML 1.1 reads otherwise are Unsupported."""
    if not _printable(text) or _JSON_SURROGATE.search(text):
        raise Unsupported("tabs, carriage returns, surrogate escapes or unprintable characters")
    try:
        return json.loads(text, object_pairs_hook=_json_object, parse_float=_json_float,
                          parse_constant=_json_constant)
    except (ValueError, RecursionError):
        raise Unsupported("not JSON") from None


def _json_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs) or any(len(key) > 1000 for key in out):
        raise Unsupported("a duplicate key")
    return out


def _json_float(text: str) -> float:
    if not _YAML_FLOAT.fullmatch(text):  # YAML 1.1 reads 1e5 as a string
        raise Unsupported(text)
    return float(text)


def _json_constant(text: str) -> Any:
    raise Unsupported(text)


def _is_entry(s: str) -> bool:
    return s[0] == "-" and (len(s) == 1 or s[1] == " ")


class _Blocks:
    """Recursive descent over (indent, content) lines."""

    def __init__(self, lines: list[tuple[str, str]]):
        self.lines = lines
        self.i = 0
        self.flows: dict[str, Any] = {}  # one value for each flow text: read-only, like all of the result

    def node(self, indent: str) -> Any:
        if _is_entry(self.lines[self.i][1]):
            return self.sequence(indent)
        return self.mapping(indent)

    def _deeper(self, indent: str) -> bool:
        return self.i < len(self.lines) and self.lines[self.i][0] > indent

    def sequence(self, indent: str) -> list[Any]:
        lines, out = self.lines, []
        while self.i < len(lines) and lines[self.i][0] == indent and _is_entry(lines[self.i][1]):
            s = lines[self.i][1]
            rest = s[1:].lstrip(" ")
            if not rest or rest[0] == "#":
                self.i += 1
                out.append(self.node(lines[self.i][0]) if self._deeper(indent) else None)
                continue
            column = indent + " " * (len(s) - len(rest))
            if _is_entry(rest) or _key(rest) is not None:
                lines[self.i] = (column, rest)  # the entry's own node starts at its column on this line
                out.append(self.node(column))
            else:
                out.append(_inline(rest, self.flows))
                self.i += 1
                if self._deeper(indent):
                    raise Unsupported("a multi-line scalar")
        if self._deeper(indent):
            raise Unsupported("unexpected indentation")
        return out

    def mapping(self, indent: str) -> dict[str, Any]:
        lines, out, n, i = self.lines, {}, len(self.lines), self.i
        while i < n:
            at, s = lines[i]
            if at != indent:
                if at < indent:
                    break
                raise Unsupported("unexpected indentation")
            simple = _SIMPLE_PAIR.match(s)  # most lines: an identifier, and a word or none
            if simple is not None:
                key, word = simple.groups()
                rest = "" if word is None else word
            else:
                if _is_entry(s):
                    raise Unsupported("a list entry among a mapping's keys")
                split = _key(s)
                if split is None:
                    raise Unsupported("a line that is not 'key: value'")
                key, rest = split
                word = None
            if key in out:
                raise Unsupported("a duplicate key")
            i += 1
            deeper = i < n and lines[i][0] > indent
            if rest:
                if deeper:
                    raise Unsupported("a multi-line scalar")
                out[key] = plain_value(word) if word is not None else _inline(rest, self.flows)
                continue
            self.i = i
            if deeper:
                out[key] = self.node(lines[i][0])
            elif i < n and lines[i][0] == indent and _is_entry(lines[i][1]):
                out[key] = self.sequence(indent)
            else:
                out[key] = None
            i = self.i
        self.i = i
        return out


def _key(s: str) -> tuple[str, str] | None:
    """(raw key, the rest after 'key:' without its comment) for a 'key: value' line, else None."""
    simple = _SIMPLE_KEY.match(s)
    if simple is not None:
        rest = s[simple.end():]
        return simple.group(1), ("" if rest.startswith("#") else rest)
    if s[0] in "\"'":
        try:
            key, end = _quoted(s, 0)
        except Unsupported:
            return None
        if s[end:end + 1] != ":" or s[end + 1:end + 2] not in ("", " "):
            return None
        rest = s[end + 1:].lstrip(" ")
    else:
        j = s.find(": ")
        if j < 0:
            if not s.endswith(":"):
                return None
            key, rest = s[:-1], ""
        else:
            key, rest = s[:j], s[j + 2:].lstrip(" ")
        key = key.rstrip(" ")
        if not key or key[0] in _BAD_PLAIN_START or key[0] == "-" or _BAD_KEY_CHARS.search(key):
            return None
    if len(key) > 1000:  # PyYAML refuses simple keys over 1024 characters
        return None
    return key, ("" if rest.startswith("#") else rest)


def _inline(rest: str, flows: dict[str, Any]) -> Any:
    """The value written after 'key: ' or '- ' on one line."""
    first = rest[0]
    if first in "[{":
        if "#" in rest:
            if "'" in rest or '"' in rest:  # is it a comment or inside a quoted scalar? PyYAML can tell
                raise Unsupported("a flow collection with '#'")
            j = rest.find(" #")
            rest = rest[:j].rstrip(" ") if j >= 0 else rest
        return _flow(rest, flows)
    if first in "\"'":
        value, end = _quoted(rest, 0)
        tail = rest[end:]
        if tail and not (tail[0] == " " and tail.lstrip(" ")[:1] in ("", "#")):
            raise Unsupported("text after a quoted scalar or a flow collection")
        return value
    j = rest.find(" #")
    if j >= 0:
        rest = rest[:j].rstrip(" ")
    if first in _BAD_PLAIN_START or _is_entry(rest) or ": " in rest or rest.endswith(":"):
        raise Unsupported(rest)
    return plain_value(rest)


def _quoted(s: str, at: int) -> tuple[str, int]:
    """A one-line quoted scalar starting at s[at]: (value, index after its closing quote)."""
    if s[at] == '"':
        end = s.find('"', at + 1)
        if end < 0 or "\\" in s[at + 1:end]:
            raise Unsupported("an escape or a multi-line double-quoted scalar")
        return s[at + 1:end], end + 1
    parts, pos = [], at + 1
    while True:
        end = s.find("'", pos)
        if end < 0:
            raise Unsupported("a multi-line single-quoted scalar")
        parts.append(s[pos:end])
        if s[end + 1:end + 2] != "'":
            return "'".join(parts), end + 1
        pos = end + 2


# one token of a flow collection: an indicator, a double- or single-quoted scalar, a plain scalar, or anything
# else (a comment, a colon inside a plain scalar, an escape), which makes the flow Unsupported
_FLOW_TOKEN = re.compile(
    r""" *(?:([\[\]{},]|:(?=[ ,\[\]{}]|$))|"([^"\\]*)"|'((?:[^']|'')*)'"""
    r"""|((?:-(?=[^\s,\[\]{}])|[^\s,?\[\]{}#:'"&*!|>%@`-])(?:[^,?\[\]{}#:]*[^\s,?\[\]{}#:])?)|(.))""")


def _flow(s: str, seen: dict[str, Any]) -> Any:
    """A flow collection on one line: [a, b] and {k: v}, nested, of plain and quoted scalars (s is all of it)."""
    value = seen.get(s, _MISS)
    if value is _MISS:
        tokens = _FLOW_TOKEN.findall(s)
        value, end = _flow_value(tokens, 0)
        if end != len(tokens):
            raise Unsupported("text after a flow collection")
        seen[s] = value  # pools of one kind repeat their serving, stack and cost lines word for word
    return value


def _flow_scalar(token: tuple[str, str, str, str, str]) -> tuple[Any, str]:
    """(value, raw key text) of a scalar token."""
    indicator, double, single, plain, other = token
    if plain:
        return plain_value(plain), plain
    if indicator or other:
        raise Unsupported("a flow scalar")
    text = double if not single else single.replace("''", "'")
    if not double and not single and token != ("", "", "", "", ""):
        raise Unsupported("a flow scalar")
    return text, text


def _flow_value(tokens: list[tuple[str, str, str, str, str]], i: int) -> tuple[Any, int]:
    if i >= len(tokens):
        raise Unsupported("an unclosed flow collection")
    c = tokens[i][0]
    if c == "[":
        items: list[Any] = []
        i += 1
        if i < len(tokens) and tokens[i][0] == "]":
            return items, i + 1
        while True:
            value, i = _flow_value(tokens, i)
            items.append(value)
            c = tokens[i][0] if i < len(tokens) else ""
            if c == "]":
                return items, i + 1
            if c != "," or i + 1 >= len(tokens) or tokens[i + 1][0] == "]":
                raise Unsupported("a flow list")
            i += 1
    if c == "{":
        out: dict[str, Any] = {}
        i += 1
        if i < len(tokens) and tokens[i][0] == "}":
            return out, i + 1
        while True:
            if i + 2 >= len(tokens) or tokens[i + 1][0] != ":" or tokens[i + 2][0] in (",", "}", ":"):
                raise Unsupported("a flow mapping entry")
            _, key = _flow_scalar(tokens[i])
            if key in out:
                raise Unsupported("a duplicate key")
            out[key], i = _flow_value(tokens, i + 2)
            c = tokens[i][0] if i < len(tokens) else ""
            if c == "}":
                return out, i + 1
            if c != "," or i + 1 >= len(tokens) or tokens[i + 1][0] == "}":
                raise Unsupported("a flow mapping")
            i += 1
    if c:
        raise Unsupported("a missing flow value")
    return _flow_scalar(tokens[i])[0], i + 1
