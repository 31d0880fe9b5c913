"""Label mapping in PromQL: each target label computed from raw labels, like normalizers.series resolves them.

A target has setters in increasing priority: each one writes the target when its source label matches its
regex, so "first non-empty of Hostname, hostname" is a copy from hostname followed by a copy from Hostname.
Raw labels that some target overwrites (a raw `device` beside the computed one) are read from copies taken
before any write, so the order of the targets never changes what a setter sees.
"""

from __future__ import annotations

from dataclasses import dataclass

from normalizers.promrules import promql

TEMP = "hetpool_raw_"  # prefix of the copies of raw labels; dropped by the aggregation that ends every term
ANY, NON_EMPTY = "(.*)", "(.+)"
INSTANCE_HOST = "(.+?)(?::[0-9]+)?"  # Prometheus' instance label without its port: the scrape target's host


@dataclass(frozen=True)
class Setter:
    """Write the target with `repl` when label `src` matches `regex` (src '' with regex '' always matches)."""

    src: str
    regex: str
    repl: str
    computed: bool = False  # src is a target computed earlier in the same term, not a raw label

    @property
    def is_copy(self) -> bool:
        """A plain copy of a non-empty raw label."""
        return self.regex == NON_EMPTY and self.repl == "$1" and not self.computed


def copy(src: str) -> Setter:
    """Take the raw label's value when it is not empty."""
    return Setter(src, NON_EMPTY, "$1")


def const(value: str) -> Setter:
    """Always write this value."""
    return Setter("", "", promql.replacement(value))


def when(src: str, value: str, repl: str, *, computed: bool = False) -> Setter:
    """Write `repl` when the label equals `value` exactly."""
    return Setter(src, promql.literal(value), promql.replacement(repl), computed)


@dataclass(frozen=True)
class Target:
    """One output label and how it is computed; with no setter that applies, the label is absent."""

    name: str
    setters: tuple[Setter, ...]

    @property
    def identity(self) -> bool:
        """The label is kept as it arrives (an attribute named like its source label)."""
        return len(self.setters) == 1 and self.setters[0].is_copy and self.setters[0].src == self.name


@dataclass(frozen=True)
class Join:
    """A temporary label holding several raw labels joined by `sep` (for assign rules naming several labels)."""

    name: str
    sep: str
    srcs: tuple[str, ...]


def relabel(expr: str, targets: tuple[Target, ...], joins: tuple[Join, ...] = ()) -> str:
    """The expression with every target label written; temporaries stay until the caller aggregates them away."""
    written = {t.name for t in targets if not t.identity}
    raw_reads = sorted({s.src for t in targets if not t.identity for s in t.setters
                        if s.src and not s.computed and s.src in written}
                       | {src for j in joins for src in j.srcs if src in written})
    for src in raw_reads:
        expr = promql.label_replace(expr, TEMP + src, "$1", src, ANY)
    for j in joins:
        srcs = tuple(TEMP + s if s in written else s for s in j.srcs)
        expr = promql.label_join(expr, j.name, j.sep, srcs)
    done: set[str] = set()
    for t in targets:
        if t.identity:
            continue
        for s in t.setters:
            if s.computed and s.src not in done:
                raise ValueError(f"target {t.name!r} reads {s.src!r} before it is computed")
        expr = _apply(expr, t, written)
        done.add(t.name)
    return expr


def _apply(expr: str, t: Target, written: set[str]) -> str:
    setters = list(t.setters)
    first = setters[0] if setters else None
    if first is not None and first.is_copy:
        # the lowest-priority copy also clears whatever raw value the target label had
        setters[0] = Setter(first.src, ANY, "$1")
    elif first is None or first.src or first.regex:
        setters.insert(0, const(""))
    for s in setters:
        src = TEMP + s.src if s.src in written and not s.computed else s.src
        expr = promql.label_replace(expr, t.name, s.repl, src, s.regex)
    return expr


def output_labels(targets: tuple[Target, ...]) -> tuple[str, ...]:
    """The labels a term keeps, in target order."""
    return tuple(dict.fromkeys(t.name for t in targets))
