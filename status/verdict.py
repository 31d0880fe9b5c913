"""The sentences an operator reads first: the fleet's verdict, and each pool's status with its reason."""

from __future__ import annotations

from status.evaluate import RANK, Status, worst


def pool_status(statuses: tuple[Status, ...], pool: str) -> tuple[str, str]:
    """A pool's level and reason (its pool-scope status, which already rolls up its nodes)."""
    mine = [s for s in statuses if s.scope == "pool" and s.pool == pool]
    if not mine:
        return "ok", "every rule passes"
    return mine[0].level, mine[0].reason


def verdict(statuses: tuple[Status, ...], pools: tuple[str, ...]) -> tuple[str, str]:
    """The fleet's level and one sentence naming what is wrong, worst first."""
    levels = {p: pool_status(statuses, p) for p in pools}
    collectors = [s for s in statuses if s.scope == "collector"]
    level = worst([lvl for lvl, _ in levels.values()] + [s.level for s in collectors])
    if level == "ok":
        who = f"Pool {pools[0]} is" if len(pools) == 1 else f"All {len(pools)} pools are"
        return "ok", f"{who} healthy: no status rule fires in this window."
    parts = []
    for name in ("critical", "warning"):
        hit = [f"{p} ({reason.split('; ')[0]})" for p, (lvl, reason) in levels.items() if lvl == name]
        if hit:
            shown = ", ".join(hit[:3]) + (f" and {len(hit) - 3} more" if len(hit) > 3 else "")
            parts.append(f"{len(hit)} of {len(pools)} {'pool' if len(pools) == 1 else 'pools'} {name}: {shown}")
    lagging = sorted(collectors, key=lambda s: -RANK[s.level])
    if lagging:
        noun = "collector" if len(lagging) == 1 else "collectors"
        parts.append(f"{len(lagging)} {noun} lagging ({lagging[0].node}: {lagging[0].reason})")
    return level, "; ".join(parts) + "."

