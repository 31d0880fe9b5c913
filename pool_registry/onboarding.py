"""The onboarding tracker's stages and checklist, and the registry's `onboarding.checks` that point at evidence.

A pool's `onboarding` mapping keeps its declared `stage` (ONBOARDING_STAGES) and free-text `evidence`; the
tracker's stages (TRACK_STAGES, from the seed design) are computed from `checks`, one entry per checklist item:

    checks:
      devices:   {by: wang.li, at: 2026-11-24, note: "16/16 devices visible in cnmon"}   # manual
      operators: {file: onboarding/mlu370-a/operators.csv, at: 2026-11-25}                # an evidence file
      regression: {baseline: base.csv, candidate: cand.csv, tolerance: 0.02, steps: [100, 500]}
      stability: {hours: 24}                                                              # telemetry

File paths are relative to the registry file's folder; `hetpool registry load` stores the files' contents.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

from yaml.nodes import Node

from pool_registry.yamlread import Reader

MANUAL, FILE, TELEMETRY = "manual", "file", "telemetry"
RESULTS = ("pass", "fail")

# (id, title) in order: what a chip must get through, from devices visible to routine operations.
TRACK_STAGES = (
    ("device_abstraction", "device abstraction"),
    ("inference_bringup", "inference bring-up"),
    ("multi_pool_inference", "multi-pool inference"),
    ("single_device_training", "single-device training validation"),
    ("multi_device_training", "multi-device training migration"),
    ("routine_operations", "routine operations"),
)
STAGE_IDS = tuple(s for s, _ in TRACK_STAGES)


@dataclass(frozen=True)
class ItemSpec:
    """One checklist item: the stage it belongs to, how it is judged, its files and its tunable bounds."""

    id: str
    stage: str
    title: str
    kind: str
    roles: tuple[str, ...] = ()                        # the files a FILE item needs
    params: dict[str, float] = field(default_factory=dict)  # bound -> default
    evidence: tuple[str, ...] = ()                     # files a TELEMETRY item may take before telemetry flows

    @property
    def file_roles(self) -> tuple[str, ...]:
        """The files the item takes: those it needs, or those it may take."""
        return self.roles or self.evidence


ITEMS = (
    ItemSpec("devices", "device_abstraction", "devices enumerated", MANUAL),
    ItemSpec("capabilities", "device_abstraction", "capabilities declared", TELEMETRY),
    ItemSpec("metrics", "device_abstraction", "canonical metrics flowing without unexplained rejects", TELEMETRY,
             evidence=("report",)),  # a `hetpool check --json` report, until telemetry flows
    ItemSpec("operators", "inference_bringup", "operators aligned", FILE, ("file",)),
    ItemSpec("benchmark", "inference_bringup", "serving benchmark matches the pool's model", FILE, ("file",),
             {"tolerance": 0.25}),
    # only for a pool whose model declares `vision` (onboarding/items.applies): text and image requests served
    ItemSpec("multimodal", "inference_bringup", "text and image requests served", FILE, ("file",),
             {"max_error_rate": 0.01}),
    ItemSpec("routing", "multi_pool_inference", "in routing", TELEMETRY),
    ItemSpec("replay_gate", "multi_pool_inference", "replay gate passed", TELEMETRY),
    ItemSpec("precision", "single_device_training", "precision", FILE, ("file",), {"max_grad_norm_cv": 0.5}),
    ItemSpec("regression", "single_device_training", "regression against the baseline loss curve", FILE,
             ("baseline", "candidate"), {"tolerance": 0.02}),
    ItemSpec("parallelism", "multi_device_training", "parallelism (MFU at target)", FILE, ("file",),
             {"mfu_target": 0.3}),
    ItemSpec("communication", "multi_device_training", "communication (collectives at bandwidth)", MANUAL),
    ItemSpec("state", "multi_device_training", "state (checkpoint save and resume)", MANUAL),
    ItemSpec("stability", "routine_operations", "long-run stability", TELEMETRY,
             params={"hours": 24.0, "max_memory_growth": 0.05}),
)
ITEM_IDS = tuple(i.id for i in ITEMS)


def item_spec(item_id: str) -> ItemSpec:
    """The checklist item with this id."""
    for spec in ITEMS:
        if spec.id == item_id:
            return spec
    raise KeyError(f"unknown checklist item {item_id!r}; expected one of: {', '.join(ITEM_IDS)}")


@dataclass(frozen=True)
class Check:
    """What the registry says about one checklist item: a sign-off, evidence files, and bounds."""

    item: str
    files: dict[str, str] = field(default_factory=dict)    # role -> path as written
    params: dict[str, float] = field(default_factory=dict)
    steps: tuple[int, ...] = ()                              # regression: the key steps (default: quartiles)
    by: str | None = None
    at: dt.date | None = None
    note: str = ""
    result: str = "pass"


def read_checks(r: Reader, node: Node, path: str) -> dict[str, Check]:
    """Parse `onboarding.checks`, validating each item's keys against its kind."""
    out = {}
    for item, value in r.free_mapping(node, path).items():
        sub = f"{path}.{item}"
        if item not in ITEM_IDS:
            r.fail(value, sub, f"unknown checklist item '{item}'; expected one of: {', '.join(ITEM_IDS)}")
            continue
        out[item] = _check(r, item_spec(item), value, sub)
    return out


def _check(r: Reader, spec: ItemSpec, node: Node, path: str) -> Check:
    params = tuple(spec.params) + (("steps",) if spec.id == "regression" else ())
    if spec.kind == MANUAL:
        f = r.mapping(node, path, required=("by", "at"), optional=("note", "result"))
        return Check(spec.id, by=r.optional(f, "by", path, r.string, None), at=r.optional(f, "at", path, r.date, None),
                     note=r.optional(f, "note", path, r.string, ""),
                     result=r.optional(f, "result", path, lambda n, p: r.choice(n, p, RESULTS), "pass"))
    f = r.mapping(node, path, required=spec.roles, optional=(*spec.evidence, *params, "at", "note"))
    files = {role: r.optional(f, role, path, r.string, "") for role in spec.file_roles if role in f}
    values = {k: r.optional(f, k, path, lambda n, p: r.number(n, p, gt=0), v) for k, v in spec.params.items()}
    steps: tuple[int, ...] = ()
    if "steps" in f:
        steps = tuple(r.integer(s, f"{path}.steps[{i}]", ge=0) for i, s in enumerate(r.sequence(f["steps"],
                                                                                              f"{path}.steps")))
    return Check(spec.id, files=files, params=values, steps=steps, at=r.optional(f, "at", path, r.date, None),
                 note=r.optional(f, "note", path, r.string, ""))


def check_to_dict(c: Check) -> dict[str, object]:
    """A check in the registry file's own schema."""
    spec = item_spec(c.item)
    if spec.kind == MANUAL:
        out: dict[str, object] = {"by": c.by, "at": c.at.isoformat() if c.at else None, "result": c.result}
        return {**out, "note": c.note} if c.note else out
    out = {**c.files, **c.params}
    if c.steps:
        out["steps"] = list(c.steps)
    if c.at:
        out["at"] = c.at.isoformat()
    if c.note:
        out["note"] = c.note
    return out
