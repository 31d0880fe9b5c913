"""Profile coverage of an exporter's families, for `hetpool check`: what each family becomes, and which of the
core canonical metrics (the ones an operator needs to see a device) the exporter does not deliver.

A family is `mapped` when a profile maps one of its samples (to a canonical metric, read in the profile's
source unit, or as an error signal), or when it feeds a derived metric; `ignored` when the profile's `ignore`
names it; `unknown` when no profile maps it (no profile claims the name, or the one that does has no entry for
it). A derived metric is delivered when every one of its inputs is in the file.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from canonical.metrics import CORE_METRICS
from normalizers.lint import Family
from normalizers.profile import Profile
from normalizers.profile.sets import ProfileSet
from normalizers.series import coverage

MAPPED, IGNORED, UNKNOWN = "mapped", "ignored", "unknown"


@dataclass
class Covered:
    """One family: its type and sample count, the profile that reads it, what it becomes."""

    name: str
    type: str
    samples: int
    profile: str | None = None
    status: str = UNKNOWN
    canonical: list[dict[str, object]] = field(default_factory=list)  # {"metric", "unit"[, "derived", "missing"]}
    reason: str | None = None

    def as_dict(self) -> dict[str, object]:
        """The JSON form of `hetpool check --json`."""
        return {"name": self.name, "type": self.type, "samples": self.samples, "profile": self.profile,
                "canonical": self.canonical, "status": self.status, "reason": self.reason}


def _one(family: Family, names: set[str], profiles: ProfileSet, forced: Profile | None) -> Covered:
    out = Covered(family.name, family.type, family.samples)
    statuses: set[str] = set()
    seen: set[tuple[str, str]] = set()
    if not family.series:  # metadata only: what a profile would make of it, though it delivers nothing
        profile = forced or profiles.detect(family.name)
        out.profile, out.reason = (profile.name if profile else None), "no samples"
        got = coverage(profile, family.name, {}) if profile else None
        known = {"mapped": MAPPED, "input": MAPPED, "ignored": IGNORED}
        out.status = known.get(got.status, UNKNOWN) if got else UNKNOWN
        return out
    for sample, label_sets in family.series.items():
        profile = forced or profiles.detect(sample)
        if profile is None:
            out.reason = out.reason or f"no profile knows {sample!r}"
            continue
        out.profile = out.profile or profile.name
        for labels in label_sets or [{}]:
            got = coverage(profile, sample, labels)
            statuses.add(got.status)
            if got.reason and got.status == "unmapped":
                out.reason = out.reason or got.reason
            if got.metric is not None and (got.metric, got.unit or "") not in seen:
                seen.add((got.metric, got.unit or ""))
                out.canonical.append({"metric": got.metric, "unit": got.unit})
            for d in got.derived:
                if (d.metric, d.unit) in seen:
                    continue
                seen.add((d.metric, d.unit))
                missing = [i for i in d.inputs if i not in names]
                out.canonical.append({"metric": d.metric, "unit": d.unit, "derived": True, "missing": missing})
    if statuses & {"mapped", "input"}:
        out.status, out.reason = MAPPED, None
    elif "ignored" in statuses:
        out.status, out.reason = IGNORED, None
    return out


def cover(families: list[Family], profiles: ProfileSet, forced: Profile | None = None
          ) -> tuple[list[Covered], list[str]]:
    """Each family's coverage, and the core canonical metrics none of them delivers."""
    names = {sample for f in families for sample in f.series}
    covered = [_one(f, names, profiles, forced) for f in families]
    delivered = {str(c["metric"]) for f in covered for c in f.canonical if not c.get("missing")}
    return covered, [m for m in CORE_METRICS if m not in delivered]
