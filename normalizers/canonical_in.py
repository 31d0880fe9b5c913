"""Canonical series read back: feed names and labels (`canonical.feednames`) into canonical rows, no profile.

What `hetpool serve-feed` serves and what the rules of `hetpool rules` record is already canonical: the name
says the metric (and a histogram's part), the labels say pool, node and device, every other label is an
attribute, and values are in canonical units. Each series is resolved here into the same `Resolution` a
vendor series gets, so the vectorized normalizer does the rest as for raw input: value checks, duplicates,
error events from counters and 0/1 states through the stored error state, and versions.
"""

from __future__ import annotations

from canonical.feednames import (
    COMPONENT_SCOPE,
    ERROR_LABELS,
    ERROR_STATE,
    ERRORS_SAMPLE,
    SCOPE_LABEL,
    VERSION_LABELS,
    VERSION_SAMPLE,
    attributes_of,
    canonical_of,
)
from canonical.metrics import ERROR_CLASSES, METRICS, SEVERITIES, ErrorClass
from canonical.prometheus import CREATED_SUFFIX
from normalizers.normalize import Normalizer, Options
from normalizers.profile import COUNTER, STICKY, ErrorMap, ValueRule
from normalizers.series import Context, ErrorUse, Resolution, canonical_json, format_number, nul_label
from normalizers.textformat import render_series

PROFILE = "canonical"  # what the runs and rejects of canonical input name as their profile
# The feed's and the rules' own series: neither canonical samples nor unknown metrics, so counted as ignored.
OWN_SERIES = ("hetpool_feed_series", "hetpool_feed_series_dropped", "hetpool_pool_info")
STATE_RULE = ValueRule(values={0.0: 0.0, 1.0: 1.0})  # an error state is held (1) or not (0), nothing else
_STATS = {"_bucket": "bucket", "_sum": "sum", "_count": "count"}


def resolve_canonical(ctx: Context, name: str, labels: dict[str, str]) -> Resolution:
    """What one canonical series becomes; never raises for bad data, a reason says why it is rejected."""
    nul = nul_label(labels)
    if nul is not None:
        return Resolution(name, nul, PROFILE)
    if name in OWN_SERIES:
        return Resolution(name, None, PROFILE, kind="ignored")
    found = canonical_of(name)
    if found is None and name not in (ERRORS_SAMPLE, ERROR_STATE, VERSION_SAMPLE):
        if name.endswith(CREATED_SUFFIX):
            return Resolution(name, f"'{name}' is the creation time of a counter, not a sample", PROFILE)
        return Resolution(name, f"metric '{name}' is not a canonical feed name; read it without --canonical, "
                                f"through a vendor profile", PROFILE)
    pool, node, device = labels.get("pool", ""), labels.get("node", ""), labels.get("device", "")
    known = sorted(p.id for p in ctx.pools)
    if not pool:
        return Resolution(name, "no pool label: a canonical series names its pool", PROFILE)
    if pool not in known:
        return Resolution(name, f"pool '{pool}' is not in the registry; known: {', '.join(known)}", PROFILE)
    if not node:
        return Resolution(name, "no node label: a canonical series names its node", PROFILE, pool=pool)
    vendor, ours = labels.get("vendor", ""), ctx.vendors.get(pool, "")
    if vendor and ours and vendor != ours:  # the label is derived from the writer's registry, so it is not stored
        return Resolution(name, f"vendor {vendor!r} is not the vendor of pool '{pool}', whose chip is {ours!r} "
                                f"in this registry: the registry the feed was written with places the pool on "
                                f"other hardware", PROFILE, pool=pool)
    placed = Resolution(name, None, PROFILE, pool, node, device)
    if name == VERSION_SAMPLE:
        return _version(placed, labels)
    if name in (ERRORS_SAMPLE, ERROR_STATE):
        return _error(placed, labels)
    assert found is not None
    metric, part = found
    scope = labels.get(SCOPE_LABEL, "")
    if scope not in ("", COMPONENT_SCOPE):
        return Resolution(name, f"{SCOPE_LABEL} {scope!r} is not a scope the feed writes; expected "
                                f"{COMPONENT_SCOPE!r} or no {SCOPE_LABEL} label", PROFILE, pool, node)
    wide = scope != COMPONENT_SCOPE
    if METRICS[metric].kind != "histogram":
        return Resolution(name, None, PROFILE, pool, node, device, metric, canonical_json(attributes_of(labels)),
                          kind=METRICS[metric].kind, device_wide=wide)
    attrs = attributes_of(labels, skip=("le", "stat"))
    attrs["stat"] = _STATS[part]
    if part == "_bucket":
        try:
            attrs["le"] = format_number(float(labels["le"]))
        except (KeyError, ValueError):
            return Resolution(name, f"histogram bucket '{name}' has a missing or bad le {labels.get('le')!r}",
                              PROFILE, pool, node)
    return Resolution(name, None, PROFILE, pool, node, device, metric, canonical_json(attrs), kind="histogram",
                      device_wide=wide)


def _version(placed: Resolution, labels: dict[str, str]) -> Resolution:
    component, version = (labels.get(k, "") for k in VERSION_LABELS)
    if not component or not version:
        return Resolution(placed.name, f"'{placed.name}' needs both a component and a version label, got "
                                       f"component={component!r} version={version!r}", PROFILE)
    # an info series is no sample of its own: counted as ignored, its version observed where it is placed
    return Resolution(placed.name, None, PROFILE, placed.pool, placed.node, placed.device, kind="ignored",
                      versions=((component, version, bool(placed.device)),))


def _error(placed: Resolution, labels: dict[str, str]) -> Resolution:
    error_class, severity, code = (labels.get(k, "") for k in ERROR_LABELS)
    if error_class not in ERROR_CLASSES:
        return Resolution(placed.name, f"error_class {error_class!r} is not a canonical error class; expected one "
                                       f"of: {', '.join(ERROR_CLASSES)}", PROFILE)
    if severity not in SEVERITIES:
        return Resolution(placed.name, f"severity {severity!r} is not a canonical severity; expected one of: "
                                       f"{', '.join(SEVERITIES)}", PROFILE)
    cls = ErrorClass(error_class, severity)
    counter = placed.name == ERRORS_SAMPLE
    spec = ErrorMap(placed.name, COUNTER if counter else STICKY, code=code, fixed=cls)
    # the stored state of one series: its whole label set, pool included (a node name may recur across pools)
    ident = {"pool": placed.pool, **attributes_of(labels)}
    use = ErrorUse(spec, f"{placed.name}{canonical_json(ident)}", attributes_of(labels, skip=ERROR_LABELS), code,
                   cls, apart=True)
    return Resolution(placed.name, None, PROFILE, placed.pool, placed.node, placed.device, error=use, kind="error",
                      rule=ValueRule() if counter else STATE_RULE)


class CanonicalNormalizer(Normalizer):
    """The normalizer with every series resolved as a canonical one (the profiles of `ctx` are not read)."""

    def __init__(self, ctx: Context, options: Options):
        super().__init__(ctx, options)
        self._keys: dict[str, int] = {}
        self._same: dict[str, int] = {}

    def sid(self, key: str, name: str, labels: dict[str, str]) -> int:
        """The series id of a key, resolving the series as canonical the first time it is seen."""
        got = self._keys.get(key)
        if got is None:
            same = render_series(name, labels)  # label order, spacing and escapes do not make another series
            got = self._same.get(same)
            if got is None:
                got = self._same[same] = self.ids.add_series(resolve_canonical(self.ctx, name, labels))
            self._keys[key] = got
        return got

