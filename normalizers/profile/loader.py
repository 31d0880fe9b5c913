"""The one loader for profile YAML: text in, a validated Profile out, or every problem with its line."""

from __future__ import annotations

import math
import re
from pathlib import Path

from yaml.nodes import MappingNode, Node, SequenceNode

from canonical.metrics import ERRORS_METRIC, METRICS, RESERVED_ATTRIBUTES
from canonical.prometheus import SAMPLE_SUFFIXES
from normalizers.exceptions import ProfileError
from normalizers.profile import (
    DEVICE,
    PREFIX_MARK,
    SCOPES,
    STATS,
    Derive,
    Derived,
    MetricMap,
    Profile,
    Sentinel,
    ValueRule,
    VersionLabel,
)
from normalizers.profile.errors import error_maps
from normalizers.units import factor, units_for
from pool_registry import Reader
from pool_registry.yamlread import read_text

_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]*$")
_METRIC = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
_LABEL = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
_TOP = ("vendor", "description", "detect", "node_labels", "device_labels", "labels", "versions", "sentinels",
        "metrics", "derived", "errors", "ignore")
_NO_NAMES: tuple[str, ...] = ()
_MAP_KEYS = ("unit", "when", "attributes", "labels", "derive", "min", "max", "reject_values", "values", "stat",
             "scope")


def load_profile(path: str | Path) -> Profile:
    """Read and validate one profile file; its name must match the file name."""
    text = read_text(path, ProfileError)
    return load_profile_text(text, str(path), file_name=Path(path).stem)


def load_profile_text(text: str, source: str = "<profile>", *, file_name: str | None = None) -> Profile:
    """Validate profile YAML text (named `file_name` when given); raise ProfileError listing every problem."""
    r = Reader(source)
    root = r.root(text, "a mapping with profile, detect and metrics", ProfileError)
    top = r.mapping(root, "", required=("profile", "metrics"), optional=_TOP)
    name = r.optional(top, "profile", "", r.text, "")
    if name and not _NAME.match(name):
        r.fail(top["profile"], "profile", f"bad profile name {name!r}; use lower-case letters, digits, '_', '-'")
    elif name and file_name is not None and name != file_name:
        r.fail(top["profile"], "profile", f"profile name '{name}' differs from the file name '{file_name}.yaml'")
    labels: dict[str, str] = r.optional(top, "labels", "", r.string_map, {})
    for label, attr in labels.items():
        _check_attribute(r, top["labels"], f"labels.{label}", attr)
    metrics = _metrics(r, top.get("metrics"))
    derived = tuple(_derived(r, p, n) for p, n in r.items(top.get("derived"), "derived"))
    errors = error_maps(r, top.get("errors"))
    profile = Profile(
        name=name, source=source,
        vendor=r.optional(top, "vendor", "", r.string, ""),
        description=r.optional(top, "description", "", r.string, ""),
        detect=_names(r, top.get("detect"), "detect", _METRIC),
        node_labels=_names(r, top.get("node_labels"), "node_labels", _LABEL),
        device_labels=_names(r, top.get("device_labels"), "device_labels", _LABEL),
        labels=labels,
        versions=_versions(r, top.get("versions")),
        sentinels=tuple(_sentinel(r, p, n) for p, n in r.items(top.get("sentinels"), "sentinels")),
        metrics=metrics, derived=derived, errors=errors, ignore=_ignore(r, top.get("ignore")),
    )
    for name_ in set(errors) & set(metrics):
        r.fail(top["errors"], f"errors.{name_}", f"'{name_}' is already mapped under metrics")
    _check_ignore(r, top.get("ignore"), profile)
    if not profile.detect and not r.problems:
        r.fail(root, "detect", "missing: list the metric-name prefixes that identify this dialect")
    if r.problems:
        raise ProfileError(r.problems)
    return profile


def _names(r: Reader, node: Node | None, path: str, pattern: re.Pattern[str]) -> tuple[str, ...]:
    if node is None:
        return ()
    out = r.string_list(node, path)
    for i, item in enumerate(out):
        if item and not pattern.match(item):
            r.fail(node.value[i], f"{path}[{i}]", f"bad name {item!r}")
    return out


def _ignore(r: Reader, node: Node | None) -> tuple[str, ...]:
    """Metric names (a family with its _total, _bucket, ... samples) or `prefix*`, known and not mapped."""
    if node is None:
        return ()
    out = r.string_list(node, "ignore")
    for i, entry in enumerate(out):
        name = entry[:-1] if entry.endswith(PREFIX_MARK) else entry
        if not entry.strip():
            r.fail(node.value[i], f"ignore[{i}]", "expected a non-empty metric name, or a prefix ending in '*'")
        elif not _METRIC.match(name):
            r.fail(node.value[i], f"ignore[{i}]", f"bad entry {entry!r}; expected a metric name, or a name prefix "
                                                  f"followed by a single '*' at the end")
    return out


def _check_ignore(r: Reader, node: Node | None, profile: Profile) -> None:
    """A name both mapped and ignored is a contradiction: say which entry covers which name."""
    if node is None or not isinstance(node, SequenceNode):
        return
    at = {entry: item for entry, item in zip(profile.ignore, node.value, strict=False)}
    for name in sorted(profile.names()):
        entry = profile.ignores(name)
        if entry is not None:
            i = profile.ignore.index(entry)
            where = "metrics" if name in profile.metrics else "errors" if name in profile.errors else "derived"
            covers = "" if entry == name else f" (entry '{entry}' covers it)"
            r.fail(at.get(entry), f"ignore[{i}]", f"'{name}' is both mapped under {where} and ignored{covers}; "
                                                  f"drop one of the two")
    for i, entry in enumerate(profile.ignore):
        # a sample of a mapped family (its _bucket, _total, ...) would be read by the mapping, never ignored
        base = next((entry[: -len(sfx)] for sfx in SAMPLE_SUFFIXES if entry.endswith(sfx) and entry[: -len(sfx)]
                     in profile.metrics), None)
        if base is not None:
            r.fail(at.get(entry), f"ignore[{i}]", f"'{entry}' is a sample of '{base}', which is mapped under "
                                                  f"metrics; drop one of the two")


def _check_attribute(r: Reader, node: Node, path: str, attr: str) -> None:
    if attr in RESERVED_ATTRIBUTES:
        r.fail(node, path, f"attribute '{attr}' is written by the normalizer itself; pick another name")


def _unit(r: Reader, node: Node | None, path: str, metric: str) -> tuple[str, float]:
    if node is None:
        r.fail(None, path, "missing required field")
        return "", 1.0
    unit = r.text(node, path)
    canon = METRICS.get(metric)
    if canon is None or not unit:
        return unit, 1.0
    mult = factor(unit, canon.unit)
    if mult is None:
        r.fail(node, path, f"unit '{unit}' does not convert to {canon.unit} ({metric}); expected one of: "
               f"{', '.join(units_for(canon.unit))}")
        return unit, 1.0
    return unit, mult


def _canonical(r: Reader, node: Node | None, path: str) -> str:
    if node is None:
        return ""
    metric = r.text(node, path)
    if metric and metric not in METRICS:
        r.fail(node, path, f"unknown canonical metric '{metric}'; known: {', '.join(METRICS)}")
    return metric


def _metrics(r: Reader, node: Node | None) -> dict[str, tuple[MetricMap, ...]]:
    out: dict[str, tuple[MetricMap, ...]] = {}
    if node is None:
        return out
    for source, value in r.free_mapping(node, "metrics").items():
        path = f"metrics.{source}"
        if not _METRIC.match(source):
            r.fail(value, path, f"bad source metric name {source!r}")
        if isinstance(value, SequenceNode):
            maps = tuple(_metric_map(r, f"{path}[{i}]", item, source) for i, item in enumerate(value.value))
            if any(not m.when for m in maps[:-1]):
                r.fail(value, path, "every entry but the last needs 'when' labels to tell the entries apart")
            out[source] = maps
        else:
            out[source] = (_metric_map(r, path, value, source),)
    return out


def _metric_map(r: Reader, path: str, node: Node, source: str) -> MetricMap:
    f = r.mapping(node, path, required=("metric",), optional=_MAP_KEYS)
    metric = _canonical(r, f.get("metric"), f"{path}.metric")
    unit, mult = _unit(r, f.get("unit"), f"{path}.unit", metric)
    attributes: dict[str, str] = r.optional(f, "attributes", path, r.string_map, {})
    labels: dict[str, str] = r.optional(f, "labels", path, r.string_map, {})
    for key in list(attributes) + list(labels.values()):
        _check_attribute(r, node, path, key)
    stat = r.optional(f, "stat", path, lambda n, p: r.choice(n, p, STATS), None)
    canon = METRICS.get(metric)
    if stat and canon and canon.kind != "histogram":
        r.fail(f["stat"], f"{path}.stat", f"'stat' only applies to histogram metrics, not {metric}")
    if metric == ERRORS_METRIC:
        r.fail(f["metric"], f"{path}.metric", "error signals go under 'errors', which say how codes are classed")
    derive = tuple(_derive(r, f"{path}.derive.{k}", k, v)
                   for k, v in (r.free_mapping(f["derive"], f"{path}.derive").items() if "derive" in f else []))
    return MetricMap(
        source=source, metric=metric, unit=unit, factor=mult,
        when=r.optional(f, "when", path, r.string_map, {}),
        attributes=attributes, labels=labels, derive=derive, stat=stat, scope=_scope(r, f, path),
        rule=ValueRule(
            min=r.optional(f, "min", path, r.number, None),
            max=r.optional(f, "max", path, r.number, None),
            reject_values={v: str(reason) for v, reason in _number_keys(r, f.get("reject_values"),
                                                                         f"{path}.reject_values").items()},
            values={v: _as_float(r, n, f"{path}.values") for v, n in _number_keys(
                r, f.get("values"), f"{path}.values", raw=True).items()},
        ),
    )


def _number_keys(r: Reader, node: Node | None, path: str, raw: bool = False) -> dict[float, object]:
    out: dict[float, object] = {}
    if node is None:
        return out
    for key, value in r.free_mapping(node, path).items():
        try:
            number = float(key)
        except ValueError:
            r.fail(value, f"{path}.{key}", f"expected a number as key, got {key!r}")
            continue
        out[number] = value if raw else r.text(value, f"{path}.{key}")
    return out


def _as_float(r: Reader, node: object, path: str) -> float:
    return r.number(node, path) if isinstance(node, Node) else 0.0


def _derive(r: Reader, path: str, attribute: str, node: Node) -> Derive:
    f = r.mapping(node, path, required=("label", "values"), optional=("default",))
    return Derive(attribute=attribute, label=r.optional(f, "label", path, r.text, ""),
                  values=r.optional(f, "values", path, r.string_map, {}),
                  default=r.optional(f, "default", path, r.text, None))


def _derived(r: Reader, path: str, node: Node) -> Derived:
    ratio = isinstance(node, MappingNode) and any(k.value == "ratio" for k, _ in node.value)
    op = "ratio" if ratio else "sum"
    f = r.mapping(node, path, required=("metric", op, "unit"), optional=("scope",))
    metric = _canonical(r, f.get("metric"), f"{path}.metric")
    unit, mult = _unit(r, f.get("unit"), f"{path}.unit", metric)
    inputs = r.optional(f, op, path, r.string_list, _NO_NAMES)
    if ratio and len(inputs) != 2:
        r.fail(f["ratio"], f"{path}.ratio", "expected two source metrics: the numerator, then the denominator")
    if "sum" in f and len(inputs) < 2:
        r.fail(f["sum"], f"{path}.sum", "expected at least two source metrics to add up")
    return Derived(metric=metric, unit=unit, factor=mult, inputs=inputs, scope=_scope(r, f, path), ratio=ratio)


def _scope(r: Reader, f: dict[str, Node], path: str) -> str:
    """device (the default) or component: whether a series describes its device as a whole."""
    return r.optional(f, "scope", path, lambda n, p: r.choice(n, p, SCOPES), DEVICE)


def _versions(r: Reader, node: Node | None) -> tuple[VersionLabel, ...]:
    out = []
    if node is None:
        return ()
    for label, value in r.free_mapping(node, "versions").items():
        path = f"versions.{label}"
        if isinstance(value, MappingNode):
            f = r.mapping(value, path, required=("component",), optional=("per_device",))
            out.append(VersionLabel(label, r.optional(f, "component", path, r.string, ""),
                                    r.optional(f, "per_device", path, r.boolean, False)))
        else:
            out.append(VersionLabel(label, r.string(value, path)))
    return tuple(out)


def _sentinel(r: Reader, path: str, node: Node) -> Sentinel:
    f = r.mapping(node, path, required=("at_or_above", "reason"))
    return Sentinel(r.optional(f, "at_or_above", path, r.number, math.inf),
                    r.optional(f, "reason", path, r.string, ""))
