"""Line-aware YAML reading: every value keeps its file, line and field path for error messages."""

from __future__ import annotations

import datetime as dt
import difflib
import gc
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import yaml
from yaml.constructor import SafeConstructor
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from canonical import fileread

T = TypeVar("T")
# a number in exponent form without a fraction's dot: a string to YAML 1.1's resolver, a number to YAML 1.2 and to
# JSON (a registry snapshot is JSON, and json writes 0.00001 as 1e-05)
_EXPONENT = re.compile(r"^[-+]?(0|[1-9][0-9]*)(\.[0-9]*)?[eE][-+]?[0-9]+$")


class ConfigError(Exception):
    """A YAML file that cannot be used; carries every problem found, each with file, line and path."""

    def __init__(self, problems: list[Problem]):
        self.problems = sorted(problems, key=lambda p: p.line or 0)
        problems = self.problems
        first = problems[0]
        more = f" (and {len(problems) - 1} more problems)" if len(problems) > 1 else ""
        super().__init__(f"{first}{more}")


@dataclass(frozen=True)
class Problem:
    """One validation failure at a place in a file."""

    file: str
    line: int | None
    path: str
    message: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        return f"{where}: {self.path}: {self.message}" if self.path else f"{where}: {self.message}"


_TYPE_NAMES = {
    "tag:yaml.org,2002:str": "string",
    "tag:yaml.org,2002:int": "integer",
    "tag:yaml.org,2002:float": "number",
    "tag:yaml.org,2002:bool": "boolean",
    "tag:yaml.org,2002:null": "null",
    "tag:yaml.org,2002:timestamp": "date",
}


def _describe(node: Node) -> str:
    if isinstance(node, MappingNode):
        return "a mapping"
    if isinstance(node, SequenceNode):
        return "a list"
    kind = _TYPE_NAMES.get(node.tag, node.tag)
    return f"{node.value!r} ({kind})"


def _fast_loader() -> type | None:
    """libyaml's safe loader, its implicit-tag resolution remembered per scalar text (a registry repeats most of
    its values); None without libyaml."""
    base = getattr(yaml, "CSafeLoader", None)
    if base is None:
        return None

    class Loader(base):  # type: ignore[misc, valid-type]
        seen: ClassVar[dict[tuple[str, tuple[bool, ...]], str]] = {}

        def resolve(self, kind: type, value: Any, implicit: Any) -> str:
            if kind is not ScalarNode or not isinstance(value, str):
                return str(super().resolve(kind, value, implicit))
            key = (value, tuple(implicit))
            tag = self.seen.get(key)
            if tag is None:
                tag = str(super().resolve(kind, value, implicit))
                if len(self.seen) < 200_000:
                    self.seen[key] = tag
            return tag

    return Loader


@contextmanager
def no_gc_pauses() -> Iterator[None]:
    """Hold off the cyclic garbage collector while a large tree is built and read.

    A registry of 10,000 pools makes some 400,000 node objects, all alive until the read ends; each collection
    walks every one of them, which made load time grow faster than the file (and tripled it at 10,000 pools).
    The tree itself is no garbage; cycles made meanwhile wait for the collection that follows."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


FAST_LOADER = _fast_loader()


@dataclass(frozen=True)
class Field:
    """One optional scalar of a mapping: its key, the Reader method that reads it, its bounds and its default."""

    key: str
    read: str  # text, string, integer, number, choice or boolean
    default: Any
    gt: float | None = None
    ge: float | None = None
    le: float | None = None
    options: tuple[str, ...] = ()


class Reader:
    """Walks a composed YAML tree, converting values and collecting problems instead of stopping at one."""

    def __init__(self, file: str):
        self.file = file
        self.problems: list[Problem] = []
        self._constructor = yaml.constructor.SafeConstructor()

    # -- problems -------------------------------------------------------------------------------
    def fail(self, node: Node | None, path: str, message: str) -> None:
        """Record a problem at a node's line."""
        line = node.start_mark.line + 1 if node is not None else None
        self.problems.append(Problem(self.file, line, path, message))

    def raise_if_problems(self) -> None:
        """Raise ConfigError when anything was recorded."""
        if self.problems:
            raise ConfigError(self.problems)

    # -- documents --------------------------------------------------------------------------------
    def compose(self, text: str) -> Node | None:
        """Parse YAML text into a node tree; syntax errors become problems with their line.

        libyaml's parser (when PyYAML has it) reads a large file tens of times faster; a document it refuses
        is read again by the pure-Python parser, whose messages the problems quote."""
        if FAST_LOADER is not None:
            try:
                with no_gc_pauses():
                    return yaml.compose(text, Loader=FAST_LOADER)
            except Exception:  # whatever it refuses, and however it says so, the reference parser says again
                pass
        try:
            with no_gc_pauses():
                return yaml.compose(text, Loader=yaml.SafeLoader)
        except yaml.MarkedYAMLError as exc:
            mark = exc.problem_mark or exc.context_mark
            line = mark.line + 1 if mark is not None else None
            self.problems.append(Problem(self.file, line, "", f"YAML syntax error: {exc.problem}"))
        except yaml.reader.ReaderError as exc:  # a control character: its message would span two lines
            line = text.count("\n", 0, exc.position) + 1
            column = exc.position - (text.rfind("\n", 0, exc.position) + 1) + 1
            code = exc.character if isinstance(exc.character, int) else ord(exc.character)
            self.problems.append(Problem(self.file, line, "", f"YAML syntax error: character U+{code:04X} at "
                                                              f"column {column} is not allowed in YAML"))
        except yaml.YAMLError as exc:
            self.problems.append(Problem(self.file, None, "", f"YAML syntax error: {' '.join(str(exc).split())}"))
        except RecursionError:
            self.problems.append(Problem(self.file, None, "", "YAML nested too deeply to read (hundreds of levels)"))
        return None

    def root(self, text: str, expected: str, error: type[ConfigError]) -> Node:
        """The document's top node; an empty or unparsable document raises `error` at once."""
        node = self.compose(text)
        if node is None and not self.problems:
            self.fail(None, "", f"empty file; expected {expected}")
        if node is None:
            raise error(self.problems)
        return node

    # -- structure --------------------------------------------------------------------------------
    def mapping(
        self, node: Node, path: str, required: tuple[str, ...], optional: tuple[str, ...] = ()
    ) -> dict[str, Node]:
        """Return key -> node, reporting missing, unknown and duplicate keys."""
        if not isinstance(node, MappingNode):
            self.fail(node, path, f"expected a mapping, got {_describe(node)}")
            return {}
        allowed = required + optional
        out: dict[str, Node] = {}
        lines: dict[str, int] = {}
        for key_node, value_node in node.value:
            key = str(key_node.value)
            sub = f"{path}.{key}" if path else key
            if key in out:
                self.fail(key_node, sub, f"duplicate key (first at line {lines[key]})")
                continue
            if key not in allowed:
                hint = difflib.get_close_matches(key, allowed, n=1)
                did = f"did you mean '{hint[0]}'? " if hint else ""
                self.fail(key_node, sub, f"unknown key '{key}'; {did}expected one of: {', '.join(allowed)}")
                continue
            out[key] = value_node
            lines[key] = key_node.start_mark.line + 1
        for key in required:
            if key not in out:
                self.fail(node, f"{path}.{key}" if path else key, "missing required field")
        return out

    def free_mapping(self, node: Node, path: str) -> dict[str, Node]:
        """A mapping whose keys are data (for example component -> version)."""
        if not isinstance(node, MappingNode):
            self.fail(node, path, f"expected a mapping, got {_describe(node)}")
            return {}
        out: dict[str, Node] = {}
        for key_node, value_node in node.value:
            key = str(key_node.value)
            if key in out:
                self.fail(key_node, f"{path}.{key}", "duplicate key")
                continue
            out[key] = value_node
        return out

    def sequence(self, node: Node, path: str) -> list[Node]:
        """Return the items of a YAML list."""
        if not isinstance(node, SequenceNode):
            self.fail(node, path, f"expected a list, got {_describe(node)}")
            return []
        return list(node.value)

    def items(self, node: Node | None, path: str) -> Iterator[tuple[str, Node]]:
        """Yield (path[i], node) for each element of an optional list."""
        if node is None:
            return
        for i, item in enumerate(self.sequence(node, path)):
            yield f"{path}[{i}]", item

    # -- scalars ----------------------------------------------------------------------------------
    def _scalar(self, node: Node) -> Any:
        if isinstance(node, ScalarNode) and (build := _SCALARS.get(node.tag)) is not None:
            return build(self._constructor, node)  # the common tags, without the bookkeeping of object graphs
        return self._constructor.construct_object(node, deep=True)

    def string(self, node: Node, path: str, *, allow_empty: bool = False) -> str:
        """A string; numbers are refused so a version like 12.4 must be quoted, as YAML would mangle 12.10."""
        if not isinstance(node, ScalarNode) or node.tag != "tag:yaml.org,2002:str":
            self.fail(node, path, f"expected a string, got {_describe(node)}")
            return ""
        value = str(node.value)
        if not value.strip() and not allow_empty:
            self.fail(node, path, "expected a non-empty string")
        return value

    def text(self, node: Node, path: str) -> str:
        """A scalar taken as text whatever YAML typed it as (for ids and labels)."""
        if not isinstance(node, ScalarNode) or node.tag == "tag:yaml.org,2002:null":
            self.fail(node, path, f"expected a string, got {_describe(node)}")
            return ""
        return str(node.value)

    def number(
        self, node: Node, path: str, *, gt: float | None = None, ge: float | None = None,
        le: float | None = None,
    ) -> float:
        """A real number with optional bounds."""
        if isinstance(node, ScalarNode) and not node.style and _EXPONENT.match(str(node.value)):
            value = float(node.value)  # YAML 1.2 and JSON read 1e-05 as a number, where YAML 1.1 wants 1.0e-05
        elif not isinstance(node, ScalarNode) or node.tag not in (
            "tag:yaml.org,2002:int", "tag:yaml.org,2002:float"
        ):
            self.fail(node, path, f"expected a number, got {_describe(node)}")
            return 0.0
        else:
            got = self._digits(node, path)
            if got is None:
                return 0.0
            value = float(got)
        if value != value or value in (float("inf"), float("-inf")):
            self.fail(node, path, f"expected a finite number, got {node.value!r}")
            return 0.0
        # an out-of-range value reads as 0 so that checks depending on it stay quiet
        return value if self._bounds(node, path, value, gt, ge, le) else 0.0

    def integer(
        self, node: Node, path: str, *, gt: int | None = None, ge: int | None = None, le: int | None = None,
    ) -> int:
        """A whole number with optional bounds."""
        if not isinstance(node, ScalarNode) or node.tag != "tag:yaml.org,2002:int":
            self.fail(node, path, f"expected an integer, got {_describe(node)}")
            return 0
        got = self._digits(node, path)
        if got is None:
            return 0
        value = int(got)
        return value if self._bounds(node, path, value, gt, ge, le) else 0

    def _digits(self, node: Node, path: str) -> Any:
        """A number scalar's value, or None (and a problem) for one too long to be a number Python reads: an
        integer of more than 4,300 digits, or a float whose conversion overflows."""
        try:
            return self._scalar(node)
        except (ValueError, OverflowError):
            text = str(node.value)
            shown = text if len(text) <= 40 else f"{text[:20]}...{text[-10:]} ({len(text):,} characters)"
            self.fail(node, path, f"expected a number, got {shown}, too long to be one")
            return None

    def _bounds(self, node: Node, path: str, value: float, gt: float | None, ge: float | None,
                le: float | None) -> bool:
        for bound, ok, op in ((gt, gt is None or value > gt, ">"), (ge, ge is None or value >= ge, ">="),
                              (le, le is None or value <= le, "<=")):
            if not ok:
                self.fail(node, path, f"must be {op} {bound:g}, got {node.value}")
                return False
        return True

    def boolean(self, node: Node, path: str) -> bool:
        """A YAML boolean."""
        if not isinstance(node, ScalarNode) or node.tag != "tag:yaml.org,2002:bool":
            self.fail(node, path, f"expected true or false, got {_describe(node)}")
            return False
        return bool(self._scalar(node))

    def date(self, node: Node, path: str) -> dt.date | None:
        """A calendar date written as YYYY-MM-DD."""
        if isinstance(node, ScalarNode) and node.tag == "tag:yaml.org,2002:timestamp":
            value = self._scalar(node)
            return value.date() if isinstance(value, dt.datetime) else value
        if isinstance(node, ScalarNode) and node.tag == "tag:yaml.org,2002:str":
            try:
                return dt.date.fromisoformat(node.value)
            except ValueError:
                pass
        self.fail(node, path, f"expected a date (YYYY-MM-DD), got {_describe(node)}")
        return None

    def choice(self, node: Node, path: str, options: tuple[str, ...]) -> str:
        """A string that must be one of a fixed set."""
        value = self.text(node, path)
        if value and value not in options:
            self.fail(node, path, f"unknown value '{value}'; expected one of: {', '.join(options)}")
        return value

    def string_list(self, node: Node, path: str) -> tuple[str, ...]:
        """A list of strings."""
        return tuple(self.text(item, f"{path}[{i}]") for i, item in enumerate(self.sequence(node, path)))

    def string_map(self, node: Node, path: str) -> dict[str, str]:
        """A mapping of free keys to string values."""
        return {k: self.text(v, f"{path}.{k}") for k, v in self.free_mapping(node, path).items()}

    def optional(self, fields: dict[str, Node], key: str, path: str, read: Callable[[Node, str], T],
                 default: T) -> T:
        """Read fields[key] when present, else the default."""
        node = fields.get(key)
        return default if node is None else read(node, f"{path}.{key}" if path else key)


    def fields(self, fields: dict[str, Node], path: str, table: tuple[Field, ...]) -> list[Any]:
        """Each field of the table read from fields, or its default when absent."""
        out: list[Any] = []
        for fd in table:
            node = fields.get(fd.key)
            if node is None:
                out.append(fd.default)
                continue
            sub = f"{path}.{fd.key}" if path else fd.key
            if fd.read == "integer":
                out.append(self.integer(node, sub, gt=fd.gt, ge=fd.ge, le=fd.le))  # type: ignore[arg-type]
            elif fd.read == "number":
                out.append(self.number(node, sub, gt=fd.gt, ge=fd.ge, le=fd.le))
            elif fd.read == "choice":
                out.append(self.choice(node, sub, fd.options))
            else:
                out.append(getattr(self, fd.read)(node, sub))
        return out

    # -- the nodes behind a problem --------------------------------------------------------------------
    def elements(self, node: Node | None) -> list[Node]:
        """The items of a list node, or none."""
        return list(node.value) if isinstance(node, SequenceNode) else []

    def element(self, node: Node, i: int) -> Node:
        """The i-th item of a list node."""
        return node.value[i]

    def field(self, node: Node | None, key: str) -> Node | None:
        """The value node of key in a mapping node (to point at its line), else the node itself."""
        if isinstance(node, MappingNode):
            for key_node, value_node in node.value:
                if key_node.value == key:
                    return value_node
        return node

    def line(self, node: Node | None) -> int | None:
        """The 1-based line a node starts on."""
        return node.start_mark.line + 1 if node is not None else None

    def empty_mapping(self, node: Node) -> bool:
        """Whether the node is an empty mapping ({})."""
        return isinstance(node, MappingNode) and not node.value


def read_text(path: str | Path, error: type[ConfigError] = ConfigError) -> str:
    """Read a config file, turning I/O trouble into `error` naming the file."""
    try:
        return fileread.read_text(path, "a YAML file", encoding="utf-8")
    except fileread.UnreadableFile as exc:
        raise error([Problem(str(exc.path), None, "", exc.reason)]) from None


_SCALARS: dict[str, Callable[[SafeConstructor, ScalarNode], Any]] = {
    "tag:yaml.org,2002:int": SafeConstructor.construct_yaml_int,
    "tag:yaml.org,2002:float": SafeConstructor.construct_yaml_float,
    "tag:yaml.org,2002:bool": SafeConstructor.construct_yaml_bool,
    "tag:yaml.org,2002:str": SafeConstructor.construct_yaml_str,
    "tag:yaml.org,2002:null": SafeConstructor.construct_yaml_null,
}
