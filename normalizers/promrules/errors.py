"""A profile's error signals as the canonical error series: counters as totals, sticky codes as 0/1 states.

- An error counter (kind counter) is recorded as `accelerator_errors_total` with the class, severity and code
  the normalizer gives its events; the value is the raw counter, so a reader takes increases as events and a
  drop as a restart, as the store does. Counters of one code on one device (two sources, or the series a
  signal's `series_labels` tell apart) are summed.
- A sticky code (kind sticky_code) is recorded as `accelerator_error_state`, one series per code of the
  profile's table: 1 while the signal holds that code, else 0 (`DCGM_FI_DEV_XID_ERRORS == bool 79` labelled
  code="79"). A reader counts an event each time a series goes to 1, or first appears at 1: the store's one
  event per change to a non-zero code. A signal whose code is a label, or fixed, is one series, 1 while it is
  not 0. Several sources of one code on one device are one series, their maximum.
- A bitmask (kind bitmask) is one state series per bit of its table, 1 while the bit is set
  (`floor(x / 2^b) % 2`); a mask with a bit the table does not name is left out, as the store rejects it.

A code that is not in the profile's table cannot become a label in PromQL: every such code is one series
code="other" with the table's default class, 1 while the signal holds any code not in the table, so a change
from one such code to another is no event there, where the store counts it. A sticky signal whose class comes
from a label (`by_label`) and whose code is the value has only that series. Events the store folds into one
incident (two sources of one class on one device at the same instant, stored with their codes joined by '+')
stay apart here, one per code.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from canonical.feednames import ERROR_LABELS, ERROR_STATE, ERRORS_SAMPLE
from canonical.metrics import ErrorClass
from normalizers.profile import BITMASK, COUNTER, MAX_BITS, ErrorMap, Profile, ValueRule
from normalizers.promrules import promql
from normalizers.promrules.placement import Placement
from normalizers.promrules.relabel import Setter, Target, const, copy, output_labels, relabel
from normalizers.promrules.terms import attribute_targets, checked, place_targets

OTHER = "other"
UNKNOWN = ErrorClass("unknown", "recoverable")  # what the store gives an event nothing in the profile covers
# temporary labels, aggregated away at the end of every term
SOURCE = "hetpool_error_source"  # the raw signal: keeps the sources of one device apart until they are combined
CODE, CLASS, SEVERITY = "hetpool_error_code", "hetpool_error_class", "hetpool_error_severity"
SERIES = "hetpool_error_series_"  # prefix of the copies of a signal's series_labels
ERROR_CLASS, ERROR_SEVERITY, ERROR_CODE = ERROR_LABELS


@dataclass(frozen=True)
class Branch:
    """One 0/1 or counter expression of a signal, with the error labels it carries as constants."""

    expr: str
    labels: tuple[tuple[str, str], ...] = ()


def error_terms(profile: Profile, placement: Placement, terms: dict[str, list[str]]) -> None:
    """Add the profile's error counters and states to `terms` (record name -> terms)."""
    counters: list[str] = []
    states: list[str] = []
    common = (*place_targets(profile, placement), *attribute_targets(profile, None))
    labels = (*output_labels(common), *ERROR_LABELS)
    for names, spec in _alike(profile):
        targets = (*common, *_error_targets(spec))
        branches = " or ".join(_tagged(b) for b in _branches(profile, placement, names, spec))
        if spec.kind == COUNTER:
            expr = relabel(_series_copies(f"({branches})", spec), targets, placement.joins())
            # one counter per series the store tells apart; duplicates of one series (two scrapes) are one
            keep = (*labels, SOURCE, *(SERIES + s for s in spec.series_labels))
            counters.append(promql.max_by(keep, expr))
        else:
            states.append(relabel(f"({branches})", targets, placement.joins()))
    if counters:
        terms.setdefault(ERRORS_SAMPLE, []).append(f"sum by ({', '.join(labels)}) ({' or '.join(counters)})")
    if states:
        terms.setdefault(ERROR_STATE, []).append(promql.max_by(labels, " or ".join(states)))


def _alike(profile: Profile) -> list[tuple[tuple[str, ...], ErrorMap]]:
    """The profile's signals, those read alike (Ascend's ten error code series) under one selector."""
    groups: list[tuple[list[str], ErrorMap]] = []
    for source, spec in profile.errors.items():
        same = replace(spec, source="")
        for names, known in groups:
            if known == same:
                names.append(source)
                break
        else:
            groups.append(([source], same))
    return [(tuple(names), spec) for names, spec in groups]


def _tagged(branch: Branch) -> str:
    expr = branch.expr
    for name, value in branch.labels:
        expr = promql.label_replace(expr, name, promql.replacement(value), "", "")
    return expr


def _series_copies(expr: str, spec: ErrorMap) -> str:
    """Copies of the labels that tell a signal's series apart, before any target overwrites them."""
    for label in spec.series_labels:
        expr = promql.label_replace(expr, SERIES + label, "$1", label, "(.*)")
    return expr


def _const(cls: ErrorClass) -> tuple[Target, Target]:
    return Target(ERROR_CLASS, (const(cls.error_class),)), Target(ERROR_SEVERITY, (const(cls.severity),))


def _by_table(src: str, table: dict[str, ErrorClass], fallback: ErrorClass, any_case: bool) -> tuple[Target, Target]:
    """Class and severity from a label's value through a table (hex codes are looked up in any case)."""
    def setters(part: str) -> tuple[Setter, ...]:
        found = [Setter(src, ("(?i)" if any_case else "") + promql.literal(k), promql.replacement(getattr(c, part)))
                 for k, c in table.items() if k]
        return (const(getattr(fallback, part)), *found)
    return Target(ERROR_CLASS, setters("error_class")), Target(ERROR_SEVERITY, setters("severity"))


def _error_targets(spec: ErrorMap) -> tuple[Target, ...]:
    """error_class, severity and code, as the normalizer's ErrorMap.classify and format_code give them."""
    fallback = spec.default or UNKNOWN
    if spec.by_label is not None:
        cls = _by_table(spec.by_label, spec.label_classes, fallback, False)
    elif spec.fixed is not None:
        cls = _const(spec.fixed)
    elif spec.code_label is not None:
        cls = _by_table(spec.code_label, spec.codes, fallback, spec.code_format == "hex")
    elif spec.code is not None:
        cls = _const(spec.classify(spec.code, {}) or UNKNOWN)
    else:  # the class goes with the code, which each branch carries
        cls = Target(ERROR_CLASS, (copy(CLASS),)), Target(ERROR_SEVERITY, (copy(SEVERITY),))
    if spec.code_label is not None:
        code = Target(ERROR_CODE, (copy(spec.code_label),))
    elif spec.code is not None:
        code = Target(ERROR_CODE, (const(spec.code),))
    else:
        code = Target(ERROR_CODE, (copy(CODE),))
    return (*cls, code)


def _branches(profile: Profile, placement: Placement, names: tuple[str, ...], spec: ErrorMap) -> list[Branch]:
    # the source's name is kept in a label before comparisons drop it; NaN, infinities and sentinels are dropped
    # as from every sample, and the parentheses keep those checks together
    named = promql.label_replace(promql.selector(names, placement.matchers()), SOURCE, "$1", "__name__", "(.+)")
    sel = f"({checked(named, ValueRule(), profile)})"
    if spec.kind == COUNTER:
        return [Branch(sel)]
    if spec.kind == BITMASK:
        return _bits(sel, spec)
    if spec.code_label is not None or spec.code is not None:
        return [Branch(f"{sel} != bool 0")]
    codes = _value_codes(spec)
    if spec.by_label is not None or spec.fixed is not None:
        return [Branch(f"{sel} != bool 0", ((CODE, OTHER),))]
    out = [Branch(f"{sel} == bool {promql.number(n)}", ((CODE, code), (CLASS, cls.error_class),
                                                        (SEVERITY, cls.severity)))
           for n, (code, cls) in codes.items()]
    fallback = spec.default or UNKNOWN
    others = f"{sel} != 0" + "".join(f" != {promql.number(n)}" for n in codes)
    out.append(Branch(f"({others}) * 0 + 1 or {sel} * 0", ((CODE, OTHER), (CLASS, fallback.error_class),
                                                             (SEVERITY, fallback.severity))))
    return out


def _value_codes(spec: ErrorMap) -> dict[float, tuple[str, ErrorClass]]:
    """The table's codes as sample values, each with the code and class the store gives an event of it."""
    out: dict[float, tuple[str, ErrorClass]] = {}
    for key in spec.codes:
        try:
            n = int(key, 16 if spec.code_format == "hex" else 10)
        except ValueError:
            continue  # never the spelling of a value, so no event can have it
        code = spec.format_code(n)
        out.setdefault(float(n), (code, spec.classify(code, {}) or UNKNOWN))
    return out


def _bits(sel: str, spec: ErrorMap) -> list[Branch]:
    """One branch per named bit, over the masks the store accepts: whole numbers with no unnamed bit set."""
    top = max(spec.bits)
    mask = f"({sel} >= 0 < {promql.number(2.0 ** (top + 1))})"  # no bit above the highest named one
    valid = f"({mask} and ({mask} == floor({mask}))"
    valid += "".join(f" and (floor({mask} / {promql.number(2.0 ** b)}) % 2 == 0)"
                     for b in range(top) if b not in spec.bits)
    valid += ")"
    assert top < MAX_BITS
    return [Branch(f"floor({valid} / {promql.number(2.0 ** b)}) % 2",
                   ((CODE, bit.code), (CLASS, bit.error_class.error_class), (SEVERITY, bit.error_class.severity)))
            for b, bit in sorted(spec.bits.items())]
