"""The registry's fields read from plain values (a quick parse without positions) by the same loader code.

A file with a problem, or a value whose written text the fast read does not keep (an id written as a number),
is read again by the positioned Reader: it says where and what, and the fast read never has to."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from pool_registry.yamlread import Field, Reader

T = TypeVar("T")


_ABSENT = object()
_INFINITE = (float("inf"), float("-inf"))


class Redo(Exception):
    """The quick read leaves this file to the positioned reader."""


class ValueReader(Reader):
    """Reader's checks over dicts, lists and scalars; the first problem raises Redo."""

    def __init__(self, file: str):
        super().__init__(file)
        self._keys: dict[tuple[tuple[str, ...], tuple[str, ...]], tuple[frozenset[str], frozenset[str]]] = {}
        self._tables: dict[int, list[tuple[Any, ...]]] = {}  # by the table's id: the tables are module constants

    def fail(self, node: Any, path: str, message: str) -> None:
        """Hand the file to the positioned reader, which reports every problem with its line."""
        raise Redo(f"{path}: {message}")

    def mapping(self, node: Any, path: str, required: tuple[str, ...], optional: tuple[str, ...] = ()) -> Any:
        """The mapping itself when it has every required key and no other."""
        if type(node) is not dict:
            raise Redo(path)
        keys = self._keys.get((required, optional))
        if keys is None:
            keys = self._keys[(required, optional)] = (frozenset(required + optional), frozenset(required))
        if not keys[0].issuperset(node) or not keys[1].issubset(node):
            raise Redo(path)
        return node

    def free_mapping(self, node: Any, path: str) -> dict[str, Any]:
        """A copy of a mapping whose keys are data."""
        if type(node) is not dict:
            raise Redo(path)
        return dict(node)

    def sequence(self, node: Any, path: str) -> list[Any]:
        """The list itself."""
        if type(node) is not list:
            raise Redo(path)
        return node

    def items(self, node: Any, path: str) -> Iterator[tuple[str, Any]]:
        """Yield (path[i], value) for each element of an optional list."""
        if node is None:
            return
        for i, item in enumerate(self.sequence(node, path)):
            yield f"{path}[{i}]", item

    def string(self, node: Any, path: str, *, allow_empty: bool = False) -> str:
        """A string; anything else goes to the positioned reader."""
        if type(node) is not str or (not allow_empty and not node.strip()):
            raise Redo(path)
        return node

    def text(self, node: Any, path: str) -> str:
        """A string value; a number or date, whose written text only the positioned reader has, is redone."""
        if type(node) is not str:
            raise Redo(path)
        return node

    def number(self, node: Any, path: str, *, gt: float | None = None, ge: float | None = None,
               le: float | None = None) -> float:
        """A finite real number within its bounds."""
        if type(node) is not int and type(node) is not float:
            raise Redo(path)
        value = float(node)
        if (value != value or value in (float("inf"), float("-inf")) or (gt is not None and value <= gt)
                or (ge is not None and value < ge) or (le is not None and value > le)):
            raise Redo(path)
        return value

    def integer(self, node: Any, path: str, *, gt: int | None = None, ge: int | None = None,
                le: int | None = None) -> int:
        """A whole number within its bounds."""
        if (type(node) is not int or (gt is not None and node <= gt) or (ge is not None and node < ge)
                or (le is not None and node > le)):
            raise Redo(path)
        return node

    def boolean(self, node: Any, path: str) -> bool:
        """true or false."""
        if type(node) is not bool:
            raise Redo(path)
        return node

    def date(self, node: Any, path: str) -> dt.date | None:
        """A calendar date: a YAML date, or a string in YYYY-MM-DD."""
        if isinstance(node, dt.datetime):
            return node.date()
        if isinstance(node, dt.date):
            return node
        if type(node) is str:
            try:
                return dt.date.fromisoformat(node)
            except ValueError:
                pass
        raise Redo(path)

    def string_list(self, node: Any, path: str) -> tuple[str, ...]:
        """A list of strings."""
        values = tuple(self.sequence(node, path))
        if any(type(v) is not str for v in values):
            raise Redo(path)
        return values

    def string_map(self, node: Any, path: str) -> dict[str, str]:
        """A mapping of free keys to string values."""
        out = self.free_mapping(node, path)
        if any(type(v) is not str for v in out.values()):
            raise Redo(path)
        return out

    def optional(self, fields: dict[str, Any], key: str, path: str, read: Callable[[Any, str], T],
                 default: T) -> T:
        """Read fields[key] when present (a null too, which the read refuses), else the default."""
        if key not in fields:
            return default
        return read(fields[key], path)  # the parent's path: a Redo's reason is never shown

    def fields(self, fields: dict[str, Any], path: str, table: tuple[Field, ...]) -> list[Any]:
        """Each field of the table, type and bounds checked in one loop: the reads most of a registry is."""
        rows = self._tables.get(id(table))
        if rows is None:
            rows = self._tables[id(table)] = [(fd.key, fd.read, fd.default, fd.gt, fd.ge, fd.le, fd.options)
                                              for fd in table]
        out: list[Any] = []
        for key, kind, default, gt, ge, le, options in rows:
            value = fields.get(key, _ABSENT)
            if value is _ABSENT:
                out.append(default)
                continue
            t = type(value)
            if kind == "integer" or kind == "number":
                if not (t is int or (t is float and kind == "number")) or value != value or value in _INFINITE \
                        or (gt is not None and value <= gt) or (ge is not None and value < ge) \
                        or (le is not None and value > le):
                    raise Redo(f"{path}.{key}")
                out.append(float(value) if kind == "number" else value)
            elif kind == "text" or kind == "choice":
                if t is not str or (kind == "choice" and value and value not in options):
                    raise Redo(f"{path}.{key}")
                out.append(value)
            else:
                out.append(getattr(self, kind)(value, path))
        return out

    # -- what only the error paths ask for ----------------------------------------------------------
    def elements(self, node: Any) -> list[Any]:
        """The items of a list, or none."""
        return node if type(node) is list else []

    def element(self, node: Any, i: int) -> Any:
        """The i-th item of a list."""
        return node[i]

    def field(self, node: Any, key: str) -> Any:
        """A mapping's value at key, else the mapping."""
        return node.get(key, node) if type(node) is dict else node

    def line(self, node: Any) -> int | None:
        """Plain values have no positions."""
        return None

    def empty_mapping(self, node: Any) -> bool:
        """Whether the value is {}."""
        return type(node) is dict and not node
