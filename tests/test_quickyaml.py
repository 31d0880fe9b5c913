"""The quick YAML reader gives PyYAML's values for what it reads, and refuses whatever it cannot read that way."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from yaml.nodes import MappingNode, Node, SequenceNode

from pool_registry import quickyaml
from pool_registry.quickyaml import Unsupported, parse
from tests.conftest import REPO


def pyyaml(text: str) -> Any:
    """PyYAML's safe reading of text, with each mapping key as its raw text, as the registry's reader takes it."""
    constructor = yaml.constructor.SafeConstructor()

    def value(node: Node) -> Any:
        if isinstance(node, MappingNode):
            return {str(k.value): value(v) for k, v in node.value}
        if isinstance(node, SequenceNode):
            return [value(v) for v in node.value]
        return constructor.construct_object(node, deep=True)

    return value(yaml.compose(text, Loader=yaml.SafeLoader))


# (name, text, the value PyYAML gives it: written out by hand, and checked against PyYAML below)
READ = [
    ("block mapping", "a: 1\nb: two\n", {"a": 1, "b": "two"}),
    ("YAML 1.1 booleans and nulls", "a: yes\nb: Off\nc: ~\nd: null\ne:\n", {"a": True, "b": False, "c": None,
                                                                          "d": None, "e": None}),
    ("versions that are numbers, and one that is not", "a: 12.10\nb: 0.15.1\nc: '12.10'\n",
     {"a": 12.1, "b": "0.15.1", "c": "12.10"}),
    ("YAML 1.1 integers", "a: 0x1f\nb: 1_000\nc: 1:20\nd: -7\ne: 010\n", {"a": 31, "b": 1000, "c": 80, "d": -7,
                                                                         "e": 8}),
    ("floats and their spellings", "a: 3.35\nb: .5\nc: 1e5\nd: 1.0e+5\n", {"a": 3.35, "b": 0.5, "c": "1e5",
                                                                           "d": 100000.0}),
    ("dates", "a: 2026-11-24\nb: '2026-11-24'\n", {"a": dt.date(2026, 11, 24), "b": "2026-11-24"}),
    ("comments, and a hash that is not one", "# head\na: x # note\nb: x#y\n  # indented\nc: 'q # r' # s\n",
     {"a": "x", "b": "x#y", "c": "q # r"}),
    ("quotes inside and around", "a: it's\nb: 'it''s'\nc: \"say 'hi'\"\nd: ''\ne: \"\"\n",
     {"a": "it's", "b": "it's", "c": "say 'hi'", "d": "", "e": ""}),
    ("spaces inside a plain scalar", "name: NVIDIA H100  SXM5 80GB\n", {"name": "NVIDIA H100  SXM5 80GB"}),
    ("a colon without a space", "url: http://x:9090/a\nk:v: 1\n", {"url": "http://x:9090/a", "k:v": 1}),
    ("keys stay their text", "1: a\ntrue: b\n'q k': c\n\"d\": e\n", {"1": "a", "true": "b", "q k": "c", "d": "e"}),
    ("lists indented and not", "a:\n  - 1\n  - x\nb:\n- 2\n- - 3\n  - 4\nc: z\n",
     {"a": [1, "x"], "b": [2, [3, 4]], "c": "z"}),
    ("entries that are mappings", "pools:\n  - id: a\n    n: 1\n  -\n    id: b\n  - id: c\n",
     {"pools": [{"id": "a", "n": 1}, {"id": "b"}, {"id": "c"}]}),
    ("nested mappings", "a:\n  b:\n    c: 1\n  d: 2\ne: 3\n", {"a": {"b": {"c": 1}, "d": 2}, "e": 3}),
    ("flow collections", "a: {k: v, n: [1, 'two', {x: ~}], e: {}, l: []}\nb: [a b, -1, c]  # c\n",
     {"a": {"k": "v", "n": [1, "two", {"x": None}], "e": {}, "l": []}, "b": ["a b", -1, "c"]}),
    ("a flow with quoted keys, JSON style", 'a: {"k": 1, "m n": [true]}\n', {"a": {"k": 1, "m n": [True]}}),
    ("a document start", "# c\n---\na: 1\n", {"a": 1}),
    ("a top-level list", "- 1\n- a: b\n", [1, {"a": "b"}]),
    ("JSON", '{"a": [1, 2.5, "x", true, null], "b": {"c": -0.0}}', {"a": [1, 2.5, "x", True, None],
                                                                   "b": {"c": -0.0}}),
]


@pytest.mark.parametrize(("text", "expected"), [c[1:] for c in READ], ids=[c[0] for c in READ])
def test_reads_what_pyyaml_reads(text: str, expected: Any) -> None:
    assert pyyaml(text) == expected  # the table is right about PyYAML
    assert parse(text) == expected


# (name, text): each valid YAML that this reader leaves to PyYAML, or not YAML at all
REFUSED = [
    ("an anchor and an alias", "a: &x 1\nb: *x\n"),
    ("a tag", "a: !!str 1\n"),
    ("a block scalar", "a: |\n  text\n"),
    ("a folded scalar", "a: >\n  text\n"),
    ("a plain scalar over two lines", "a: one\n  two\n"),
    ("a value on the next line", "a:\n  one\n"),
    ("a flow with quotes and a comment", "a: ['#', b] # c\n"),
    ("a flow over two lines", "a: [1,\n  2]\n"),
    ("an escape", 'a: "tab\\there"\n'),
    ("a quoted scalar over two lines", "a: 'one\n  two'\n"),
    ("a duplicate key", "a: 1\na: 2\n"),
    ("a duplicate flow key", "a: {k: 1, k: 2}\n"),
    ("a tab", "a:\t1\n"),
    ("a carriage return", "a: 1\r\nb: 2\r\n"),
    ("a byte-order mark", "\ufeffa: 1\n"),
    ("a Unicode line separator", "a: x\u2028y\n"),
    ("an unprintable character", "a: x\x01y\n"),
    ("a directive", "%YAML 1.1\n---\na: 1\n"),
    ("two documents", "a: 1\n---\nb: 2\n"),
    ("a document end", "a: 1\n...\n"),
    ("a complex key", "? a\n: 1\n"),
    ("a merge key's value", "a: <<\n"),
    ("a flow key without a space", "a: {k:v}\n"),
    ("a line that is no key", "a: 1\njust text\n"),
    ("a mapping inside a value", "a: b: c\n"),
    ("a mapping key with no value in flow", "a: {k, m}\n"),
    ("a trailing comma", "a: [1, 2,]\n"),
    ("a comment inside a flow", "a: [1, # c\n  2]\n"),
    ("an empty document", "# nothing\n"),
    ("a scalar document", "just text\n"),
    ("an unclosed flow", "a: [1, 2\n"),
    ("text after a quoted scalar", "a: 'x' y\n"),
    ("a list entry among keys", "a: 1\n- b\n"),
    ("a deeper key", "a: 1\n  b: 2\n"),
    ("a shallower key", "a:\n    b: 1\n  c: 2\n"),
    ("a key over 1,000 characters", "k" * 1001 + ": 1\n"),
    ("JSON with a duplicate key", '{"a": 1, "a": 2}'),
    ("JSON with a float YAML 1.1 reads as text", '{"a": 1e-05}'),
    ("JSON with NaN", '{"a": NaN}'),
    ("JSON with a surrogate pair", '{"a": "\\ud83d\\ude00"}'),
    ("broken JSON", '{"a": '),
    ("a flow thousands of levels deep", "a: " + "[" * 5000 + "]" * 5000 + "\n"),
    ("blocks hundreds of levels deep", "".join(" " * i + "k:\n" for i in range(2000)) + " " * 2000 + "k: 1\n"),
    ("JSON thousands of levels deep", '{"a": ' + "[" * 100000 + "]" * 100000 + "}"),
]


@pytest.mark.parametrize("text", [c[1] for c in REFUSED], ids=[c[0] for c in REFUSED])
def test_refuses_what_it_cannot_read_as_pyyaml_does(text: str) -> None:
    with pytest.raises(Unsupported):
        parse(text)


def test_reads_the_example_files_as_pyyaml_does() -> None:
    files = sorted((REPO / "examples").rglob("*.yaml"))
    assert len(files) >= 6
    for path in files:
        text = path.read_text(encoding="utf-8")
        assert parse(text) == pyyaml(text), path


# scalars a registry might hold, chosen for how YAML 1.1 types them
WORDS = ["a", "p1-*", "yes", "No", "on", "null", "~", "1", "-1", "+1", "010", "0x1f", "1_000", "1:20", "3.35",
         "12.10", ".5", "1e5", "1.0e+5", ".inf", ".NaN", "2026-11-24", "2026-11-24 10:00:00", "0.15.1", "a b",
         "it's", "a#b", "x: y", "#c", "- a", "-", "&a", "*a", "!t", "|", ">", "%", "@", "`", "?", ":", ",", "[",
         "]", "{", "}", "'", '"', "''", "a'b", 'a"b', "<<", "=", " a", "a ", "é", "a\\tb", "1,2"]

PLAIN = ["a", "p0", "h100-sxm", "dcgm", "8", "3.2", "0.45", "2026-11-24", "550.144.03", "NVIDIA H100", "true",
         "~", "llama-3.1-70b", "-2"]
_any_text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=6)
# mostly what registries hold, so that most documents are read; the rest to find where the reader is wrong
scalars = st.integers(0, 9).flatmap(lambda k: st.sampled_from(PLAIN) if k < 7 else
                                    st.sampled_from(WORDS) if k < 9 else _any_text)


def _scalar_text(word: str, quote: int) -> str:
    if quote == 1:
        return "'" + word.replace("'", "''") + "'"
    if quote == 2:
        return '"' + word + '"'
    return word


@st.composite
def documents(draw: st.DrawFn, depth: int = 0, indent: int = 0) -> str:
    """Registry-like YAML: block mappings and lists of scalars and one-line flows, any scalar, any quoting."""
    pad = " " * indent
    lines = []
    for _ in range(draw(st.integers(1, 3))):
        key = _scalar_text(draw(scalars), draw(st.integers(0, 2)))
        kind = draw(st.integers(0, 3 if depth < 2 else 1))
        if kind == 0:
            lines.append(f"{pad}{key}: {_scalar_text(draw(scalars), draw(st.integers(0, 2)))}")
        elif kind == 1:
            inner = ", ".join(f"{_scalar_text(draw(scalars), draw(st.integers(0, 2)))}: "
                              f"{_scalar_text(draw(scalars), draw(st.integers(0, 2)))}"
                              for _ in range(draw(st.integers(0, 3))))
            lines.append(f"{pad}{key}: {{{inner}}}" if draw(st.booleans()) else f"{pad}{key}: [{inner}]")
        elif kind == 2:
            lines.append(f"{pad}{key}:\n" + draw(documents(depth + 1, indent + 2)))
        else:
            lines.append(f"{pad}{key}:")
            for _ in range(draw(st.integers(1, 2))):
                lines.append(f"{pad}- " + draw(documents(depth + 1, indent + 2)).lstrip(" ").rstrip("\n"))
    return "\n".join(lines) + "\n"


def _pyyaml_or_error(text: str) -> Any:
    try:
        return pyyaml(text)
    except (yaml.YAMLError, ValueError, TypeError) as exc:  # TypeError: a key that is a collection
        return exc


def _agrees(text: str) -> None:
    """Either the quick reader refuses, or PyYAML reads the same values; never a value where PyYAML refuses."""
    try:
        got = parse(text)
    except Unsupported:
        return
    expected = _pyyaml_or_error(text)
    assert not isinstance(expected, Exception), f"read {text!r}, which PyYAML refuses: {expected}"
    assert got == expected or (got != got and expected != expected), text


@settings(max_examples=400, deadline=None)
@given(documents())
def test_generated_documents_read_as_pyyaml_reads_them(text: str) -> None:
    _agrees(text)


@settings(max_examples=400, deadline=None)
@given(documents(), st.data())
def test_a_broken_document_is_never_read_where_pyyaml_refuses_it(text: str, data: st.DataObject) -> None:
    at = data.draw(st.integers(0, len(text)))
    edit = data.draw(st.sampled_from(["drop", "insert", "dup"]))
    if edit == "drop":
        broken = text[:at] + text[at + 1:]
    elif edit == "insert":
        broken = text[:at] + data.draw(st.sampled_from([*list(" -:#'\"[]{},&*!|>?\n\t"), "  ", "- "])) + text[at:]
    else:
        broken = text + text[:at]
    assume(broken != text)
    _agrees(broken)


@settings(max_examples=200, deadline=None)
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
                    | st.text(max_size=8), lambda inner: st.lists(inner, max_size=3)
                    | st.dictionaries(st.text(max_size=5), inner, max_size=3), max_leaves=12))
def test_json_reads_as_pyyaml_reads_it_or_is_refused(value: Any) -> None:
    text = json.dumps({"v": value}, sort_keys=True, separators=(",", ":"))
    _agrees(text)


def test_flows_repeated_word_for_word_are_read_once() -> None:
    text = "".join(f"- {{id: p{i}, serving: {{model: m, replicas: 2}}}}\n" for i in range(3))
    got = parse(text)
    assert got == [{"id": f"p{i}", "serving": {"model": "m", "replicas": 2}} for i in range(3)]
    assert parse("a: [1]\nb: [1]\n") == {"a": [1], "b": [1]}


def test_the_remembered_plain_values_are_pyyamls(tmp_path: Path) -> None:
    quickyaml._seen.clear()
    for word in ("yes", "1:20", "2026-11-24", "0.15.1"):
        first, again = quickyaml.plain_value(word), quickyaml.plain_value(word)
        assert first == again == pyyaml(f"k: {word}\n")["k"]
