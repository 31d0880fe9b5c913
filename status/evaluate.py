"""The status rules applied to what the store read: frames in, statuses out, no I/O.

A device is judged on its own state; a node takes the worst level of its devices (and of error events
recorded on the node as a whole); a pool is judged on pool-wide rules (devices reporting, fatal errors, the
share of devices throttled, p99 TTFT against its SLA tier) and is at least a warning when one of its nodes
is not ok. Collectors are judged on how old their newest sample is.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from pool_registry import Registry
from status.rules import Levels, StatusRules

RANK = {"ok": 0, "warning": 1, "critical": 2}
SCOPES = ("pool", "node", "device", "collector")


@dataclass(frozen=True)
class Status:
    """One judgement: its level, where it applies and why."""

    level: str  # ok, warning, critical
    scope: str  # one of SCOPES
    pool: str
    node: str = ""
    device: str = ""
    reason: str = ""
    rule: str = field(default="", compare=False)  # the rule (a key of rules.yaml) of the leading finding

    @property
    def where(self) -> str:
        """The place as an operator names it: pool, pool/node or pool/node/device (the source for a collector)."""
        return "/".join(p for p in (self.pool, self.node, self.device) if p)


@dataclass(frozen=True)
class Facts:
    """What the rules judge: device states (store.views.status), pool tiles (store.views.health), collectors."""

    devices: pl.DataFrame
    tiles: pl.DataFrame
    collectors: pl.DataFrame
    now_ms: int


def level_of(value: float | None, levels: Levels, below: bool = False) -> str:
    """The level a value reaches: at or above a threshold, or under it when `below`."""
    if value is None:
        return "ok"
    for name in ("critical", "warning"):
        limit = getattr(levels, name)
        if limit is not None and (value < limit if below else value >= limit):
            return name
    return "ok"


def worst(levels: list[str]) -> str:
    """The most severe of some levels (ok for none)."""
    return max(levels, key=RANK.__getitem__, default="ok")


def _plural(n: float, word: str) -> str:
    n = int(n)
    return f"{n:,} {word}" if n == 1 else f"{n:,} {word}s"



def temperature_limits(reg: Registry, rules: StatusRules, pool_id: str) -> Levels:
    """A pool's temperature limits: its chip's own `thermal` limits when the registry declares them, else the rules'."""
    pool = next((p for p in reg.pools if p.id == pool_id), None)
    thermal = reg.chip_of(pool).thermal if pool is not None else None
    return Levels(thermal.warning_c, thermal.critical_c) if thermal else rules.temperature


def warning_temperatures(reg: Registry | None, rules: StatusRules) -> dict[str, float]:
    """Per pool, the temperature from which a device is hot (its warning limit), where one is set."""
    pools = reg.pools if reg is not None else ()
    return {p.id: w for p in pools if (w := temperature_limits(reg, rules, p.id).warning) is not None}  # type: ignore[arg-type]


def ruled_findings(reg: Registry, rules: StatusRules, row: dict[str, object]) -> list[tuple[str, str, str]]:
    """Every (level, reason, rule) one device's facts reach, worst first."""
    found: list[tuple[str, str, str]] = []
    limits = temperature_limits(reg, rules, str(row["pool"]))
    temp = row["temp_max"]
    if isinstance(temp, float):
        level = level_of(temp, limits)
        if level != "ok":
            limit = limits.critical if level == "critical" else limits.warning
            found.append((level, f"reached {temp:.0f} °C ({level} at {limit:.0f} °C)", "temperature"))
    fatal = float(row["fatal_errors"] or 0)  # type: ignore[arg-type]
    level = level_of(fatal, rules.fatal_errors) if fatal > 0 else "ok"
    if level != "ok":
        codes = f" (codes {row['fatal_codes']})" if row["fatal_codes"] else ""
        found.append((level, f"{_plural(fatal, 'fatal error event')}{codes}", "fatal_errors"))
    if row["device"] and row["last_health"] is not None and float(row["last_health"]) < 1:  # type: ignore[arg-type]
        found.append((rules.unhealthy, "last health reading unhealthy", "unhealthy"))
    if row["stopped"]:
        minutes = int(row["silent_ms"]) // 60_000  # type: ignore[call-overload]
        found.append((rules.stopped_reporting, f"stopped reporting: no sample for {minutes:,} min",
                      "stopped_reporting"))
    hbm = row["hbm_used"]
    if isinstance(hbm, float) and (level := level_of(hbm, rules.hbm_used)) != "ok":
        found.append((level, f"HBM {hbm:.0%} full", "hbm_used"))
    if row["throttled"]:
        found.append((rules.throttled, f"throttled in {row['throttled_minutes']:,} of {row['busy']:,} busy minutes",
                      "throttled"))
    found = [f for f in found if f[0] != "ok"]
    return sorted(found, key=lambda f: -RANK[f[0]])


def evaluate(reg: Registry, rules: StatusRules, facts: Facts, pools: tuple[str, ...] = ()) -> tuple[Status, ...]:
    """Every status that is not ok, worst first, then by pool, scope and place."""
    wanted = pools or tuple(p.id for p in reg.pools)
    out: list[Status] = []
    node_findings: dict[tuple[str, str], list[tuple[str, str, str]]] = {}
    for row in facts.devices.filter(pl.col("pool").is_in(wanted)).iter_rows(named=True):
        found = ruled_findings(reg, rules, row)
        if not found:
            continue
        key = (row["pool"], row["node"])
        if row["device"]:
            out.append(Status(found[0][0], "device", row["pool"], row["node"], row["device"],
                              "; ".join(r for _, r, _ in found), found[0][2]))
            node_findings.setdefault(key, []).append(
                (found[0][0], f"device {row['device']}: {found[0][1]}", found[0][2]))
        else:
            node_findings.setdefault(key, []).extend((lvl, f"node-wide: {r}", rule) for lvl, r, rule in found)
    for (pool, node), found in node_findings.items():
        level = worst([lvl for lvl, _, _ in found])
        lead = next(rule for lvl, _, rule in found if lvl == level)
        out.append(Status(level, "node", pool, node, "", "; ".join(r for lvl, r, _ in found if lvl == level), lead))
    tiles = {r["pool"]: r for r in facts.tiles.iter_rows(named=True)}
    for pool_id in wanted:
        out.extend(pool_statuses(reg, rules, pool_id, tiles.get(pool_id), facts.devices,
                                 [s for s in out if s.scope == "node" and s.pool == pool_id]))
    out.extend(collector_statuses(rules, facts))
    order = {s: i for i, s in enumerate(SCOPES)}
    return tuple(sorted(out, key=lambda s: (-RANK[s.level], s.pool, order[s.scope], s.node, s.device)))


def pool_statuses(reg: Registry, rules: StatusRules, pool_id: str, tile: dict[str, object] | None,
                  devices: pl.DataFrame, nodes: list[Status]) -> list[Status]:
    """The pool-wide rules of one pool, and the roll-up of its nodes."""
    declared = reg.pool(pool_id).devices
    found: list[tuple[str, str, str]] = []
    reporting = int(tile["reporting"] or 0) if tile else 0  # type: ignore[call-overload]
    if (level := level_of(reporting / declared, rules.reporting, below=True)) != "ok":
        found.append((level, f"{reporting:,} of {declared:,} devices reporting", "reporting"))
    fatal = float(tile["fatal_errors"] or 0) if tile else 0.0  # type: ignore[arg-type]
    if fatal > 0 and (level := level_of(fatal, rules.fatal_errors)) != "ok":
        found.append((level, f"{_plural(fatal, 'fatal error event')} in the window", "fatal_errors"))
    mine = devices.filter(pl.col("pool") == pool_id, pl.col("throttled").is_not_null())
    if mine.height:
        hit = int(mine["throttled"].sum())
        if (level := level_of(hit / mine.height, rules.throttled_devices)) != "ok":
            found.append((level, f"{hit:,} of {mine.height:,} devices throttled ({hit / mine.height:.0%})",
                          "throttled_devices"))
    tier, target = rules.ttft_target(pool_id)
    ttft = tile["ttft_p99"] if tile else None
    if isinstance(ttft, float) and target and (level := level_of(ttft / target, rules.ttft_p99)) != "ok":
        found.append((level, f"p99 TTFT {ttft:.2f} s against the {tier} target of {target:.2f} s", "ttft_p99"))
    if nodes:
        bad = sorted(nodes, key=lambda s: -RANK[s.level])
        more = f" and {len(bad) - 1} more node(s)" if len(bad) > 1 else ""
        found.append(("warning", f"node {bad[0].node} {bad[0].level}: {bad[0].reason}{more}", "nodes"))
    if not found:
        return []
    level = worst([lvl for lvl, _, _ in found])
    ordered = sorted(found, key=lambda f: -RANK[f[0]])
    return [Status(level, "pool", pool_id, reason="; ".join(r for _, r, _ in ordered), rule=ordered[0][2])]


def collector_statuses(rules: StatusRules, facts: Facts) -> list[Status]:
    """A recurring collector whose newest sample is old."""
    out = []
    for row in facts.collectors.iter_rows(named=True):
        newest = row["newest_sample_ms"]
        lag_s = (facts.now_ms - newest) / 1000 if newest is not None else None
        level = "critical" if lag_s is None and rules.collector_lag.critical is not None else \
            level_of(lag_s, rules.collector_lag)
        if level != "ok":
            age = "has stored no sample" if lag_s is None else f"newest sample {lag_s / 60:,.0f} min old"
            out.append(Status(level, "collector", "", node=f"{row['kind']} {row['source']}",
                              reason=f"{age} (last run {row['last_status']})", rule="collector_lag"))
    return out
