"""The `errors:` part of a profile: how each vendor error signal becomes classed events, validated with lines."""

from __future__ import annotations

from yaml.nodes import MappingNode, Node

from canonical.metrics import ERROR_CLASSES, SEVERITIES, ErrorClass
from normalizers.profile import BITMASK, ERROR_KINDS, MAX_BITS, STICKY, BitCode, ErrorMap
from pool_registry import Reader

_NO_NAMES: tuple[str, ...] = ()
_KEYS = ("code_format", "code_label", "code", "class", "codes", "levels", "default", "by_label", "series_labels",
         "bits")
# a bitmask's bits carry their own codes and classes, so these say nothing for it
_NOT_FOR_BITMASK = ("code_format", "code_label", "code", "class", "codes", "default", "by_label")


def error_maps(r: Reader, node: Node | None) -> dict[str, ErrorMap]:
    """Every entry of a profile's `errors:` mapping, problems recorded on the reader."""
    out: dict[str, ErrorMap] = {}
    if node is None:
        return out
    for source, value in r.free_mapping(node, "errors").items():
        out[source] = _error_map(r, f"errors.{source}", source, value)
    return out


def error_class(r: Reader, node: Node, path: str, levels: dict[str, ErrorClass] | None = None) -> ErrorClass:
    """`class/severity`, or the name of a level defined in the same entry."""
    text = r.text(node, path)
    if levels is not None and text in levels:
        return levels[text]
    cls, _, sev = text.partition("/")
    if cls not in ERROR_CLASSES or sev not in SEVERITIES:
        known = f"; or a level: {', '.join(levels)}" if levels else ""
        r.fail(node, path, f"expected error_class/severity with error_class in {', '.join(ERROR_CLASSES)} and "
               f"severity in {', '.join(SEVERITIES)}, got {text!r}{known}")
    return ErrorClass(cls, sev)


def _classes(r: Reader, f: dict[str, Node], key: str, path: str,
             levels: dict[str, ErrorClass] | None = None) -> dict[str, ErrorClass]:
    if key not in f:
        return {}
    entries = r.free_mapping(f[key], f"{path}.{key}")
    return {k: error_class(r, v, f"{path}.{key}.{k}", levels) for k, v in entries.items()}


def _error_map(r: Reader, path: str, source: str, node: Node) -> ErrorMap:
    f = r.mapping(node, path, required=("kind",), optional=_KEYS)
    kind = r.optional(f, "kind", path, lambda n, p: r.choice(n, p, ERROR_KINDS), STICKY)
    levels = _classes(r, f, "levels", path)
    if kind == BITMASK:
        return _bitmask(r, path, source, node, f, levels)
    if "bits" in f:
        r.fail(f["bits"], f"{path}.bits", f"'bits' only applies to kind {BITMASK}, not {kind}")
    codes = {k.upper(): c for k, c in _classes(r, f, "codes", path, levels).items()}
    by_label: str | None = None
    label_classes: dict[str, ErrorClass] = {}
    if "by_label" in f:
        g = r.mapping(f["by_label"], f"{path}.by_label", required=("label", "classes"))
        by_label = r.optional(g, "label", f"{path}.by_label", r.text, "")
        label_classes = _classes(r, g, "classes", f"{path}.by_label")
    fixed = error_class(r, f["class"], f"{path}.class") if "class" in f else None
    default = error_class(r, f["default"], f"{path}.default") if "default" in f else None
    if fixed is None and default is None:
        if by_label is None and not codes:
            r.fail(node, path, "needs 'class' (one class for all events), 'codes' with a 'default', or 'by_label'")
        else:
            r.fail(node, path, "needs a 'default' class for codes or label values not listed")
    code_label = r.optional(f, "code_label", path, r.text, None)
    code = r.optional(f, "code", path, r.text, None)
    if kind != STICKY and code_label is None and code is None:
        r.fail(node, path, "a counter needs 'code' (a fixed code) or 'code_label' (the label carrying it)")
    return ErrorMap(
        source=source, kind=kind,
        code_format=r.optional(f, "code_format", path, lambda n, p: r.choice(n, p, ("decimal", "hex")), "decimal"),
        code_label=code_label, code=code, fixed=fixed, codes=codes, default=default,
        by_label=by_label, label_classes=label_classes,
        series_labels=r.optional(f, "series_labels", path, r.string_list, _NO_NAMES),
    )


def _bitmask(r: Reader, path: str, source: str, node: Node, f: dict[str, Node],
             levels: dict[str, ErrorClass]) -> ErrorMap:
    for key in _NOT_FOR_BITMASK:
        if key in f:
            r.fail(f[key], f"{path}.{key}", f"'{key}' does not apply to kind {BITMASK}: each bit names its code "
                                            f"and class under 'bits'")
    bits: dict[int, BitCode] = {}
    if "bits" not in f:
        r.fail(node, f"{path}.bits", f"missing: kind {BITMASK} needs 'bits', bit number (0-{MAX_BITS - 1}) -> "
                                     f"class or {{code, class}}")
    else:
        entries = r.free_mapping(f["bits"], f"{path}.bits")
        if not entries and isinstance(f["bits"], MappingNode):
            r.fail(f["bits"], f"{path}.bits", "expected at least one bit")
        for key, value in entries.items():
            at = f"{path}.bits.{key}"
            bit = int(key) if key.isdigit() else -1
            if not 0 <= bit < MAX_BITS:
                r.fail(value, at, f"bad bit {key!r}; expected a whole number from 0 to {MAX_BITS - 1}")
                continue
            bits[bit] = _bit(r, at, bit, value, levels)
    return ErrorMap(source=source, kind=BITMASK, bits=bits,
                    series_labels=r.optional(f, "series_labels", path, r.string_list, _NO_NAMES))


def _bit(r: Reader, path: str, bit: int, node: Node, levels: dict[str, ErrorClass]) -> BitCode:
    """`class/severity` or a level (the code is the bit number), or {code, class}."""
    if not isinstance(node, MappingNode):
        return BitCode(str(bit), error_class(r, node, path, levels))
    g = r.mapping(node, path, required=("class",), optional=("code",))
    code = r.optional(g, "code", path, r.string, str(bit))
    cls = error_class(r, g["class"], f"{path}.class", levels) if "class" in g else ErrorClass("unknown", "recoverable")
    return BitCode(code, cls)
