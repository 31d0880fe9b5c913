"""Alerting rules for the fatal error classes of one profile's error signals.

An error counter alerts when it increased in the last 5 minutes, or appeared above zero. A sticky code (the
last XID, the Ascend fault code) alerts while it holds a fatal code it changed to in the last 5 minutes, or
that it showed when the series appeared: the store counts the first non-zero value of a new series as events
too, since the errors did happen before it. One rule per signal and class, labelled with the class and
severity of the taxonomy; the annotation names the device.
"""

from __future__ import annotations

from typing import Any

from canonical.metrics import ErrorClass
from normalizers.profile import BITMASK, COUNTER, ErrorMap, Profile
from normalizers.promrules import promql
from normalizers.promrules.placement import Placement
from normalizers.promrules.recording import Unsupported
from normalizers.promrules.terms import place_targets, term

FATAL = "fatal"
WINDOW = "5m"


def alert_name(error_class: str) -> str:
    """'memory_uncorrectable' -> 'AcceleratorMemoryUncorrectableFatal'."""
    return "Accelerator" + "".join(part.capitalize() for part in error_class.split("_")) + "Fatal"


def alerting_rules(profile: Profile, placement: Placement) -> tuple[list[dict[str, Any]], list[Unsupported]]:
    """The alerts of every fatal class the profile's error signals can report, and the signals left out."""
    rules: list[dict[str, Any]] = []
    skipped: list[Unsupported] = []
    for source, spec in profile.errors.items():
        if spec.kind == BITMASK:
            if any(b.error_class.severity == FATAL for b in spec.bits.values()):
                skipped.append(Unsupported(profile.name, source, "fatal bits of a bitmask are not alerted on"))
            continue
        for cls, narrowing in _fatal(spec):
            rules.append(_rule(profile, placement, source, spec, cls, narrowing))
    return rules, skipped


def _by_class(table: dict[str, ErrorClass]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for key, cls in table.items():
        if cls.severity == FATAL:
            out.setdefault(cls.error_class, []).append(key)
    return out


def _fatal(spec: ErrorMap) -> list[tuple[str, tuple[str, ...]]]:
    """(class, narrowing) pairs: narrowing is ('label', op, regex) or ('value', op, codes...) or ()."""
    if spec.by_label is not None:
        return _narrowed(spec.label_classes, spec.default, ("label", spec.by_label), lambda c: c)
    if spec.fixed is not None:
        return [(spec.fixed.error_class, ())] if spec.fixed.severity == FATAL else []
    if spec.code_label is not None:
        return _narrowed(spec.codes, spec.default, ("label", spec.code_label), lambda c: c)
    # the code is the sample value; hex codes are written in hex in the profile and exposed as decimals
    return _narrowed(spec.codes, spec.default, ("value",),
                     lambda c: str(int(c, 16)) if spec.code_format == "hex" else c)


def _narrowed(table: dict[str, ErrorClass], default: ErrorClass | None, where: tuple[str, ...],
              spell: Any) -> list[tuple[str, tuple[str, ...]]]:
    out = [(cls, (*where, "in", *(spell(k) for k in keys))) for cls, keys in _by_class(table).items()]
    if default is not None and default.severity == FATAL:
        others = tuple(spell(k) for k in table)
        out.append((default.error_class, (*where, "not in", *others)))
    return out


def _rule(profile: Profile, placement: Placement, source: str, spec: ErrorMap, cls: str,
          narrowing: tuple[str, ...]) -> dict[str, Any]:
    matchers = list(placement.matchers())
    values: tuple[str, ...] = ()
    among = False  # the value must be one of `values` (else: any non-zero code but them)
    if narrowing and narrowing[0] == "label":
        label, op, keys = narrowing[1], narrowing[2], narrowing[3:]
        if op == "in":
            matchers.append(promql.matcher(label, "=~", promql.alternatives(keys)))
        elif keys:
            matchers.append(promql.matcher(label, "!~", promql.alternatives(keys)))
    elif narrowing:
        among, values = narrowing[1] == "in", narrowing[2:]
    sel = promql.selector((source,), tuple(matchers))
    targets = place_targets(profile, placement)
    if spec.kind == COUNTER:
        fresh = f"increase({sel}[{WINDOW}]) > 0 or ({sel} > 0 unless {sel} offset {WINDOW})"
        expr = term(fresh, targets, placement)
        what = f"{source} rose by {{{{ $value }}}} in {WINDOW}"
    else:
        if among:
            now = " or ".join(f"{sel} == {v}" for v in values)
        else:
            now = f"{sel} != 0" + "".join(f" != {v}" for v in values)
        fresh = f"changes({sel}[{WINDOW}]) > 0 or ({sel} unless {sel} offset {WINDOW})"
        expr = term(f"({now}) and ({fresh})", targets, placement)
        what = f"{source} is {{{{ $value }}}}"
    labels = {"severity": FATAL, "class": cls, "profile": profile.name, "source": source}
    if spec.code is not None:
        labels["code"] = spec.code
    device = "device {{ $labels.device }} of node {{ $labels.node }} in pool {{ $labels.pool }}"
    return {
        "alert": alert_name(cls),
        "expr": placement.finish(expr),
        "labels": labels,
        "annotations": {"summary": f"fatal {cls} error on {device}",
                        "description": f"{what} on {device} ({profile.vendor or profile.name})."},
    }

