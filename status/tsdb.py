"""The status rules as Prometheus alerting rules over the canonical recorded series: the same thresholds on the
same window, so Prometheus, Thanos or Mimir page on the conditions the console colours.

Pure: the rules and the registry in, one rule group out. Each rule and level is one alert named as
`hetpool serve` names its alerts (`HetpoolDeviceTemperature`, severity warning or critical). The console judges
the last `window` (its default view, 24 hours) as soon as a condition holds, so the alerts have no `for:`; the
5-minute conditions (devices reporting, stopped reporting) are in the expressions, as `present_over_time(...[5m])`.
Fatal error events are the fatal-class alerts of the same rules file (`ALERTS{severity="fatal"}`) that fired
in the window. What PromQL over the recorded series cannot judge as the console does is listed, with why.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from canonical import metrics
from canonical.feednames import family_name, sample_name
from canonical.metrics import METRICS
from canonical.timeunits import parse_duration_ms
from pool_registry import Registry
from status.alerts import alert_name
from status.rules import Levels, StatusRules

GROUP = "hetpool_status"
STALE_MINUTES = 5  # the store's STALE_MS: a device with no sample in the last 5 minutes stopped reporting
DEVICE = "pool, node, device, vendor"
# every recorded per-device series, as the store's last sample of a device is its newest of any (error events
# are not recorded); one range function per name, since names dropped from a regex selector would collide
ACCELERATOR = tuple(sample_name(m) for m, c in METRICS.items() if c.per_device and c.kind in ("gauge", "counter"))
FATAL = 'ALERTS{alertstate="firing", severity="fatal"}'
NOT_COMPILED = (
    "throttled, throttled_devices: throttling compares each busy minute's clock with the pool's highest "
    "device-minute clock in the window, which the recorded series do not give minute by minute",
    "node and pool roll-ups (a node takes its worst device; a pool is a warning when a node is not ok): group "
    "Alertmanager's notifications by pool and node instead",
    "collector_lag: judges hetpool's own collectors, which a TSDB does not know",
)


@dataclass(frozen=True)
class StatusGroup:
    """The rule group, and what it leaves out."""

    group: dict[str, Any]
    not_compiled: tuple[str, ...]


def _string(text: str) -> str:
    return json.dumps(text)


def _alternatives(texts: list[str]) -> str:
    return "|".join(re.sub(r"([\\.+*?()|\[\]{}^$])", r"\\\1", t) for t in texts)


def _present(by: str, window: str, matcher: str = "") -> str:
    """1 per device with a sample of any recorded per-device series in the window."""
    sel = "{" + ", ".join(['device!=""', *([matcher] if matcher else [])]) + "}"
    return f"max by ({by}) (" + " or ".join(f"present_over_time({name}{sel}[{window}])" for name in ACCELERATOR) + ")"


def _rule(scope: str, rule: str, level: str, expr: str, summary: str) -> dict[str, Any]:
    return {"alert": alert_name(scope, rule), "expr": expr, "labels": {"severity": level},
            "annotations": {"summary": summary}}


def _levels(levels: Levels, value: str, *, below: bool = False, scale: float = 1.0) -> list[tuple[str, str]]:
    """(level, condition on `value`) for each level that is on; a warning stops short of the critical."""
    out = []
    crit, warn = levels.critical, levels.warning
    op = "<" if below else ">="
    other = ">=" if below else "<"
    if crit is not None:
        out.append(("critical", f"{value} {op} {crit * scale:g}"))
    if warn is not None and warn != crit:
        bound = f" {other} {crit * scale:g}" if crit is not None else ""
        out.append(("warning", f"{value} {op} {warn * scale:g}{bound}"))
    return out


def _by_limits(rules: StatusRules, reg: Registry | None) -> list[tuple[Levels, str]]:
    """(temperature limits, pool matcher) per set of pools sharing limits: chips' own first, the rules' for the rest."""
    own: dict[Levels, list[str]] = {}
    for pool in reg.pools if reg is not None else ():
        thermal = reg.chip_of(pool).thermal  # type: ignore[union-attr]
        if thermal is not None:
            own.setdefault(Levels(thermal.warning_c, thermal.critical_c), []).append(pool.id)
    out = [(levels, f"{{pool=~{_string(_alternatives(pools))}}}") for levels, pools in own.items()]
    mine = [p for pools in own.values() for p in pools]
    out.append((rules.temperature, f"{{pool!~{_string(_alternatives(mine))}}}" if mine else ""))
    return out


def status_group(rules: StatusRules, reg: Registry | None, window: str = "24h") -> StatusGroup:
    """The status rules as one group of alerting rules judging the last `window`."""
    parse_duration_ms(window)  # a ValueError naming it when it is no duration
    w = window
    temp, health = family_name(metrics.TEMPERATURE), family_name(metrics.HEALTH)
    used, total = family_name(metrics.MEMORY_USED), family_name(metrics.MEMORY_TOTAL)
    out: list[dict[str, Any]] = []
    for levels, pools in _by_limits(rules, reg):
        hottest = f"max by ({DEVICE}) (max_over_time({temp}{pools}[{w}]))"
        out += [_rule("device", "temperature", lvl, cond,
                      f"device {{{{ $labels.device }}}} of {{{{ $labels.node }}}} reached {{{{ $value }}}} °C in {w}")
                for lvl, cond in _levels(levels, hottest)]
    events = f"count by ({DEVICE}) (max_over_time({FATAL}[{w}]))"
    out += [_rule("device", "fatal_errors", lvl, cond, f"fatal error alerts on device {{{{ $labels.device }}}} of "
                  f"{{{{ $labels.node }}}} in {w}") for lvl, cond in _levels(rules.fatal_errors, events)]
    if rules.unhealthy != "ok":
        out.append(_rule("device", "unhealthy", rules.unhealthy, f"max by ({DEVICE}) (last_over_time({health}[{w}])) "
                         "< 1", "last health reading of device {{ $labels.device }} of {{ $labels.node }} unhealthy"))
    if rules.stopped_reporting != "ok":
        seen, recent = _present(DEVICE, w), _present(DEVICE, f"{STALE_MINUTES}m")
        out.append(_rule("device", "stopped_reporting", rules.stopped_reporting, f"{seen} unless {recent}",
                         f"device {{{{ $labels.device }}}} of {{{{ $labels.node }}}} stopped reporting: no sample "
                         f"for {STALE_MINUTES} min"))
    share = f"max by ({DEVICE}) (last_over_time({used}[{w}])) / max by ({DEVICE}) (last_over_time({total}[{w}]))"
    out += [_rule("device", "hbm_used", lvl, cond, "HBM of device {{ $labels.device }} of {{ $labels.node }} "
                  "{{ $value | humanizePercentage }} full") for lvl, cond in _levels(rules.hbm_used, f"({share})")]
    pool_events = f"count by (pool, vendor) (max_over_time({FATAL}[{w}]))"
    out += [_rule("pool", "fatal_errors", lvl, cond, f"fatal error alerts in pool {{{{ $labels.pool }}}} in {w}")
            for lvl, cond in _levels(rules.fatal_errors, pool_events)]
    out += _reporting(rules, reg)
    out += _ttft(rules, w)
    return StatusGroup({"name": GROUP, "rules": out}, NOT_COMPILED + (() if reg is not None else (
        "reporting: needs each pool's declared devices from the registry (pass --registry or load one)",)))


def _reporting(rules: StatusRules, reg: Registry | None) -> list[dict[str, Any]]:
    """Devices heard in the last 5 minutes over the pool's declared devices; a pool heard from not at all is 0.
    One rule per level, the pools joined with `or` (one rule per pool would repeat a name and labels)."""
    by_level: dict[str, list[str]] = {}
    for pool in reg.pools if reg is not None else ():
        vendor = reg.chip_of(pool).vendor  # type: ignore[union-attr]
        heard = f"count by (pool, vendor) ({_present(DEVICE, f'{STALE_MINUTES}m', f'pool={_string(pool.id)}')})"
        none = (f'label_replace(label_replace(vector(0), "pool", {_string(pool.id)}, "", ""), "vendor", '
                f'{_string(vendor)}, "", "")')
        for lvl, cond in _levels(rules.reporting, f"(({heard}) or {none}) / {pool.devices}", below=True):
            by_level.setdefault(lvl, []).append(f"({cond})")
    return [_rule("pool", "reporting", lvl, " or ".join(terms), "{{ $value | humanizePercentage }} of the declared "
                  "devices of pool {{ $labels.pool }} reporting") for lvl, terms in by_level.items()]


def _ttft(rules: StatusRules, w: str) -> list[dict[str, Any]]:
    """p99 TTFT over the window against each tier's target; a pool not named in sla.pools is in the default tier.
    One rule per level, the tiers joined with `or` (they share no pool)."""
    bucket = family_name(metrics.TTFT) + "_bucket"
    named = dict(rules.pool_tiers)
    by_level: dict[str, list[str]] = {}
    for tier, target in rules.tiers.items():
        mine = [p for p, t in named.items() if t == tier]
        if target is None or (tier != rules.default_tier and not mine):
            continue
        if tier == rules.default_tier:
            others = [p for p in named if p not in mine]
            sel = f"{{pool!~{_string(_alternatives(others))}}}" if others else ""
        else:
            sel = f"{{pool=~{_string(_alternatives(mine))}}}"
        p99 = f"histogram_quantile(0.99, sum by (pool, vendor, le) (increase({bucket}{sel}[{w}])))"
        for lvl, cond in _levels(rules.ttft_p99, f"{p99} / {target:g}"):
            by_level.setdefault(lvl, []).append(f"({cond})")
    return [_rule("pool", "ttft_p99", lvl, " or ".join(terms), "p99 TTFT of pool {{ $labels.pool }} at "
                  "{{ $value | humanizePercentage }} of its tier's target") for lvl, terms in by_level.items()]
