"""The one loader for status rules YAML: the shipped defaults, then a site file that overrides any key."""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path

from yaml.nodes import Node

from canonical.timeunits import SECOND_MS, parse_duration_ms
from pool_registry.yamlread import ConfigError, Reader, read_text

DEFAULT_RULES = Path(__file__).resolve().parent / "rules.yaml"
ENV_RULES = "HETPOOL_RULES"
LEVELS = ("ok", "warning", "critical")


class RulesError(ConfigError):
    """A status rules file that cannot be used."""


@dataclass(frozen=True)
class Levels:
    """Thresholds of one rule; None switches that level off."""

    warning: float | None
    critical: float | None


@dataclass(frozen=True)
class StatusRules:
    """Every threshold the status evaluation uses, and the files they came from."""

    temperature: Levels = Levels(None, None)        # °C, at or above
    reporting: Levels = Levels(None, None)          # share of declared devices reporting, below
    fatal_errors: Levels = Levels(None, None)       # events in the window, at or above
    throttled_devices: Levels = Levels(None, None)  # share of a pool's devices, at or above
    hbm_used: Levels = Levels(None, None)           # ratio at the last reading, at or above
    ttft_p99: Levels = Levels(None, None)           # p99 over the tier's target, at or above
    collector_lag: Levels = Levels(None, None)      # seconds, at or above
    unhealthy: str = "ok"
    stopped_reporting: str = "ok"
    throttled: str = "ok"
    default_tier: str = ""
    tiers: dict[str, float | None] = field(default_factory=dict)  # tier -> p99 TTFT target in seconds
    pool_tiers: dict[str, str] = field(default_factory=dict)
    sources: tuple[str, ...] = ()

    def ttft_target(self, pool: str) -> tuple[str, float | None]:
        """The pool's SLA tier and its p99 TTFT target (None when the tier has none)."""
        tier = self.pool_tiers.get(pool, self.default_tier)
        return tier, self.tiers.get(tier)


# rule key -> (direction, bounds): "above" fires at or above a threshold, "below" under it
_RULES = {"temperature": ("above", None), "reporting": ("below", 1.0), "fatal_errors": ("above", None),
          "throttled_devices": ("above", 1.0), "hbm_used": ("above", 1.0), "ttft_p99": ("above", None),
          "collector_lag": ("above", None)}
_DEVICE = ("unhealthy", "stopped_reporting", "throttled")


def site_rules_path(explicit: str | Path | None = None) -> Path | None:
    """The site file: --rules, else $HETPOOL_RULES, else none."""
    chosen = explicit or os.environ.get(ENV_RULES)
    return Path(chosen) if chosen else None


def load_rules(site: str | Path | None = None) -> StatusRules:
    """The shipped defaults overridden by the site file (--rules or $HETPOOL_RULES) when there is one."""
    rules = load_rules_text(read_text(DEFAULT_RULES, RulesError), str(DEFAULT_RULES))
    path = site_rules_path(site)
    if path is not None:
        rules = load_rules_text(read_text(path, RulesError), str(path), base=rules)
    return rules


def load_rules_text(text: str, source: str = "<rules>", base: StatusRules | None = None) -> StatusRules:
    """Validate rules YAML over `base` (every key it omits keeps base's value); raise RulesError listing every
    problem."""
    base = base or StatusRules()
    r = Reader(source)
    root = r.root(text, "a mapping of status rules", RulesError)
    top = r.mapping(root, "", required=(), optional=("version", *_RULES, "device", "sla"))
    if "version" in top:
        r.integer(top["version"], "version", ge=1, le=1)
    levels: dict[str, Levels] = {
        key: _levels(r, top[key], key, getattr(base, key)) if key in top else getattr(base, key) for key in _RULES}
    device: dict[str, str] = {key: getattr(base, key) for key in _DEVICE}
    if "device" in top:
        f = r.mapping(top["device"], "device", required=(), optional=_DEVICE)
        device.update({k: r.choice(v, f"device.{k}", LEVELS) for k, v in f.items()})
    tiers, default_tier, pool_tiers = dict(base.tiers), base.default_tier, dict(base.pool_tiers)
    if "sla" in top:
        default_tier, pool_tiers = _sla(r, top["sla"], tiers, default_tier, pool_tiers)
    if not default_tier and not r.problems:
        r.fail(root, "sla.default_tier", "missing required field")
    if r.problems:
        raise RulesError(r.problems)
    changes: dict[str, object] = {**levels, **device}
    return dataclasses.replace(base, **changes, tiers=tiers, default_tier=default_tier,  # type: ignore[arg-type]
                               pool_tiers=pool_tiers, sources=(*base.sources, source))


def _levels(r: Reader, node: Node, key: str, base: Levels) -> Levels:
    direction, top = _RULES[key]
    f = r.mapping(node, key, required=(), optional=("warning", "critical"))
    got = {"warning": base.warning, "critical": base.critical}
    before = len(r.problems)
    for name, value in f.items():
        path = f"{key}.{name}"
        if value.tag == "tag:yaml.org,2002:null":
            got[name] = None
        elif key == "collector_lag":
            got[name] = _seconds(r, value, path)
        else:
            got[name] = r.number(value, path, ge=0, le=top)
    warning, critical = got["warning"], got["critical"]
    if warning is not None and critical is not None and len(r.problems) == before:
        wrong = warning > critical if direction == "above" else warning < critical
        if wrong:
            side = "below" if direction == "above" else "above"
            r.fail(f.get("warning", node), f"{key}.warning",
                   f"warning {warning:g} must be {side} or at critical {critical:g} (the rule fires "
                   f"{'at or above' if direction == 'above' else 'below'} a level)")
    return Levels(warning, critical)


def _seconds(r: Reader, node: Node, path: str) -> float:
    text = r.text(node, path)
    try:
        return parse_duration_ms(text) / SECOND_MS
    except ValueError as exc:
        r.fail(node, path, str(exc))
        return 0.0


def _sla(r: Reader, node: Node, tiers: dict[str, float | None], default_tier: str,
         pool_tiers: dict[str, str]) -> tuple[str, dict[str, str]]:
    f = r.mapping(node, "sla", required=(), optional=("default_tier", "tiers", "pools"))
    if "tiers" in f:
        for tier, spec in r.free_mapping(f["tiers"], "sla.tiers").items():
            g = r.mapping(spec, f"sla.tiers.{tier}", required=("ttft_p99_s",))
            value = g.get("ttft_p99_s")
            if value is not None:
                null = value.tag == "tag:yaml.org,2002:null"
                tiers[tier] = None if null else r.number(value, f"sla.tiers.{tier}.ttft_p99_s", gt=0)
    known = ", ".join(tiers) or "(none)"
    if "default_tier" in f:
        default_tier = r.text(f["default_tier"], "sla.default_tier")
        if default_tier and default_tier not in tiers:
            r.fail(f["default_tier"], "sla.default_tier", f"unknown tier '{default_tier}'; known: {known}")
    if "pools" in f:
        for pool, value in r.free_mapping(f["pools"], "sla.pools").items():
            tier = r.text(value, f"sla.pools.{pool}")
            if tier and tier not in tiers:
                r.fail(value, f"sla.pools.{pool}", f"unknown tier '{tier}'; known: {known}")
            pool_tiers[pool] = tier
    return default_tier, pool_tiers
