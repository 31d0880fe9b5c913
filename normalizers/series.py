"""Resolving one raw series (metric name + labels) against the profiles: what it becomes, or why it cannot.

This runs once per distinct series, not per sample, so it can afford to be plain Python.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from canonical.metrics import ERRORS_METRIC, METRICS, ErrorClass
from normalizers.profile import DEVICE, IGNORED, Derived, ErrorMap, MetricMap, Profile, Sentinel, ValueRule
from normalizers.profile.sets import ProfileSet
from pool_registry import Pool


def canonical_json(attributes: dict[str, str]) -> str:
    """Attributes as canonical JSON text: sorted keys, no spaces, '{}' when empty."""
    return json.dumps(attributes, sort_keys=True, separators=(",", ":"))


def format_number(value: float) -> str:
    """A bucket bound as text: shortest stable spelling, +Inf kept as Prometheus writes it."""
    if value == float("inf"):
        return "+Inf"
    return f"{value:.12g}"


@dataclass(frozen=True)
class Context:
    """Everything resolution needs besides the series itself."""

    profiles: ProfileSet
    profile: Profile | None = None       # --profile: every series is read with this one
    pools: tuple[Pool, ...] = ()         # the registry's pools, for assignment rules
    pool: str | None = None              # --pool: every sample goes here
    node: str | None = None              # --node: for series without a node label
    vendors: Mapping[str, str] = field(default_factory=dict, hash=False)  # pool -> chip vendor (canonical)


@dataclass(frozen=True)
class DerivedUse:
    """This series is one input of a derived metric."""

    rule: str            # profile/index, unique per derived rule
    derived: Derived
    name: str            # the input's metric name
    consumed_only: bool  # True when the input has no canonical row of its own
    attributes: str      # attributes of the derived row


@dataclass(frozen=True)
class ErrorUse:
    """This series is an error signal: a sticky code or an error counter."""

    spec: ErrorMap
    source: str                     # state key: metric name + the labels that identify the series
    attributes: dict[str, str]      # attributes every event of this series carries besides its class
    code: str | None = None         # known per series (fixed, or from a label)
    error_class: ErrorClass | None = None  # known per series (fixed, by label, or from the label code)
    # an incident of its own: a canonical series is already one code with its attributes, as a feed wrote it, so
    # it is not folded with another series of its class at the same instant (the feed split what the store folded)
    apart: bool = False


@dataclass(frozen=True)
class Resolution:
    """What one series becomes; `reason` set means every sample of it is rejected with that reason."""

    name: str
    reason: str | None = None
    profile: str = ""
    pool: str = ""
    node: str = ""
    device: str = ""
    metric: str | None = None   # the canonical metric of its own row, if it has one
    attributes: str = "{}"
    scale: float = 1.0
    rule: ValueRule = field(default_factory=ValueRule)
    sentinels: tuple[Sentinel, ...] = ()
    derived: tuple[DerivedUse, ...] = ()
    error: ErrorUse | None = None
    versions: tuple[tuple[str, str, bool], ...] = ()  # (component, version, per device)
    kind: str = "gauge"
    device_wide: bool = True  # false for a series of one part of its device (profile `scope: component`)


@dataclass(frozen=True)
class Coverage:
    """How a profile covers one series, without placing it: mapped (to a canonical metric in a source unit, or
    as an error signal), an input of derived metrics, ignored, or not mapped (with the reason)."""

    status: str                       # "mapped", "input", "ignored" or "unmapped"
    metric: str | None = None
    unit: str | None = None
    derived: tuple[Derived, ...] = ()
    reason: str | None = None


def coverage(profile: Profile, name: str, labels: dict[str, str]) -> Coverage:
    """What `profile` makes of a series named `name` with `labels` (for `hetpool check`)."""
    target = profile.target(name, labels)
    if isinstance(target, str):
        return Coverage("unmapped", reason=target)
    if target is IGNORED:
        return Coverage("ignored")
    if target.error is not None:
        return Coverage("mapped", ERRORS_METRIC, "events", target.inputs)
    if target.mapping is not None:
        return Coverage("mapped", target.mapping.metric, target.mapping.unit, target.inputs)
    return Coverage("input", derived=target.inputs)


def _first(labels: dict[str, str], keys: tuple[str, ...]) -> str:
    return next((labels[k] for k in keys if labels.get(k)), "")


def _pool(ctx: Context, node: str, labels: dict[str, str]) -> tuple[str, str | None]:
    if ctx.pool is not None:
        return ctx.pool, None
    if not ctx.pools:
        return "", "no pool: pass --pool or load a registry whose pools have assign rules"
    hits = [p.id for p in ctx.pools if p.assign.matches(node, labels)]
    if not hits:
        return "", f"no pool matches node '{node}'"
    if len(hits) > 1:
        return "", f"node '{node}' matches several pools: {', '.join(hits)}"
    return hits[0], None


def _attributes(profile: Profile, mapping: MetricMap | None,
                labels: dict[str, str]) -> tuple[dict[str, str], str | None]:
    out = {attr: labels[label] for label, attr in profile.labels.items() if labels.get(label)}
    if mapping is None:
        return out, None
    out.update({attr: labels[label] for label, attr in mapping.labels.items() if labels.get(label)})
    out.update(mapping.attributes)
    for d in mapping.derive:
        value = labels.get(d.label, "")
        got = d.values.get(value, d.default)
        if got is None:
            return out, f"label {d.label}={value!r} has no {d.attribute}; expected one of: {', '.join(d.values)}"
        out[d.attribute] = got
    return out, None


def nul_label(labels: dict[str, str]) -> str | None:
    """The reason a series whose label value holds a NUL byte is rejected, or None: no column, feed or scraper
    downstream takes a NUL in text, and the exposition formats have no escape for one."""
    for label, value in labels.items():
        if "\x00" in value:
            return f"label {label!r} holds a NUL byte; a label value is text without NUL"
    return None


def resolve(ctx: Context, name: str, labels: dict[str, str]) -> Resolution:
    """Resolve one series; never raises for bad data, it returns a Resolution with a reason instead."""
    nul = nul_label(labels)
    if nul is not None:
        return Resolution(name, nul)
    profile = ctx.profile or ctx.profiles.detect(name)
    if profile is None:
        known = ", ".join(sorted(ctx.profiles.profiles))
        return Resolution(name, f"no profile knows metric '{name}' (known profiles: {known}); "
                                f"name one with --profile or add one with --profiles-dir")
    target = profile.target(name, labels)
    if isinstance(target, str):
        return Resolution(name, target, profile.name)
    node = _first(labels, profile.node_labels) or (ctx.node or "")
    if target is IGNORED:
        # not data, but an info series may carry versions (an exporter's own build): keep them where placed
        pool, why = _pool(ctx, node, labels) if node else ("", "no node")
        versions = () if why else tuple((v.component, labels[v.label], v.per_device) for v in profile.versions
                                        if labels.get(v.label))
        return Resolution(name, None, profile.name, pool, node, _first(labels, profile.device_labels),
                          versions=versions, kind="ignored")
    if not node:
        tried = ", ".join(profile.node_labels) or "(none in this profile)"
        return Resolution(name, f"no node: no label among {tried} is set and no --node was given", profile.name)
    pool, why = _pool(ctx, node, labels)
    if why:
        return Resolution(name, why, profile.name, node=node)
    device = _first(labels, profile.device_labels)
    versions = tuple((v.component, labels[v.label], v.per_device) for v in profile.versions if labels.get(v.label))
    base, _ = _attributes(profile, None, labels)
    base_json = canonical_json(base)
    derived = tuple(
        DerivedUse(f"{profile.name}/{profile.derived.index(d)}", d, name, target.mapping is None, base_json)
        for d in target.inputs)
    common = Resolution(name, None, profile.name, pool, node, device, sentinels=profile.sentinels,
                        versions=versions, derived=derived)
    if target.error is not None:
        return replace(common, error=_error_use(target.error, name, labels, base), kind="error")
    if target.mapping is None:
        return replace(common, kind="input")
    m = target.mapping
    attrs, why = _attributes(profile, m, labels)
    if why:
        return Resolution(name, why, profile.name, node=node)
    scale = m.factor
    canon = METRICS[m.metric]
    if canon.kind == "histogram":
        attrs["stat"] = target.stat or "sum"
        if target.stat == "bucket":
            try:
                attrs["le"] = format_number(float(labels["le"]) * m.factor)
            except (KeyError, ValueError):
                return Resolution(name, f"histogram bucket '{name}' has a missing or bad le "
                                        f"{labels.get('le')!r}", profile.name, node=node)
        if target.stat != "sum":
            scale = 1.0  # bucket and count values are counts of observations, not in the metric's unit
    return replace(common, metric=m.metric, attributes=canonical_json(attrs), scale=scale, rule=m.rule,
                   kind=canon.kind, device_wide=m.scope == DEVICE)


def _error_use(spec: ErrorMap, name: str, labels: dict[str, str], base: dict[str, str]) -> ErrorUse:
    ident = dict(base)
    ident.update({k: labels.get(k, "") for k in spec.series_labels})
    code = spec.code
    if spec.code_label is not None:
        code = labels.get(spec.code_label, "")
        ident[spec.code_label] = code
    cls = None
    if spec.by_label is not None or spec.fixed is not None or code is not None:
        cls = spec.classify(code or "", labels)
    return ErrorUse(spec, f"{name}{canonical_json(ident)}", base, code, cls)


def error_class_of(use: ErrorUse, code: str, labels: dict[str, str] | None = None) -> ErrorClass:
    """The class of an event whose code is only known from its value."""
    if use.error_class is not None:
        return use.error_class
    found = use.spec.classify(code, labels or {})
    return found if found is not None else ErrorClass("unknown", "recoverable")

