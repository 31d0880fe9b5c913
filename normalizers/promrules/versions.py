"""A profile's version labels as `hetpool_software_version_info{pool,node,device,vendor,component,version} 1`.

The normalizer takes a version from every placed series of the profile that carries a version label: mapped
metrics, error signals, inputs of derived metrics and ignored series (an exporter's own info series) alike;
the version is the node's, unless the profile marks it per device. The rule does the same over the names the
profile reads, one series per node (or device), component and version, while any of them carries it. A name
the profile reads only through a `when` label or a derive table is taken whatever those labels say.
"""

from __future__ import annotations

from canonical.feednames import VERSION_LABELS, VERSION_SAMPLE
from canonical.metrics import METRICS
from canonical.prometheus import COUNTER_SUFFIX, HISTOGRAM_PARTS, SAMPLE_SUFFIXES
from normalizers.profile import PREFIX_MARK, Profile, ValueRule, VersionLabel
from normalizers.promrules import promql
from normalizers.promrules.placement import Placement
from normalizers.promrules.relabel import Target, const, copy, output_labels, relabel
from normalizers.promrules.terms import checked, place_targets


def names_regex(profile: Profile) -> str:
    """A regex of every metric name the profile resolves: its names, their sample suffixes, ignored prefixes."""
    names: set[str] = set(profile.errors)
    for name, maps in profile.metrics.items():
        names.update((name, name + COUNTER_SUFFIX))
        if any(METRICS[m.metric].kind == "histogram" and m.stat is None for m in maps):
            names.update(name + part for part in HISTOGRAM_PARTS)
    for d in profile.derived:
        names.update(d.inputs)
    prefixes = []
    for entry in profile.ignore:
        if entry.endswith(PREFIX_MARK):
            prefixes.append(promql.literal(entry[:-1]) + ".*")
        else:
            names.update((entry, *(entry + suffix for suffix in SAMPLE_SUFFIXES)))
    return "|".join([promql.alternatives(sorted(names)), *prefixes])


def version_terms(profile: Profile, placement: Placement, terms: dict[str, list[str]]) -> None:
    """Add one term per version label of the profile to `terms` under the version series' name."""
    if not profile.versions:
        return
    regex = names_regex(profile)
    for v in profile.versions:
        terms.setdefault(VERSION_SAMPLE, []).append(_term(profile, placement, regex, v))


def _term(profile: Profile, placement: Placement, regex: str, v: VersionLabel) -> str:
    node, device, *pool = place_targets(profile, placement)
    component, version = VERSION_LABELS
    targets = (node, device if v.per_device else Target("device", ()), *pool,
               Target(component, (const(v.component),)), Target(version, (copy(v.label),)))
    matchers = (f"__name__=~{promql.string(regex)}", promql.matcher(v.label, "!=", ""), *placement.matchers())
    # NaN, infinities and sentinels make a sample a reject, and a reject carries no version
    sel = checked("{" + ", ".join(matchers) + "}", ValueRule(), profile)
    labels = output_labels(targets)
    return f"group by ({', '.join(labels)}) ({relabel(sel, targets, placement.joins())})"
