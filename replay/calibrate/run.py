"""Calibrate a fleet: group the evidence by pool, fit each chip and engine's pools together, carry the fits to
pools without evidence, and say why a pool's requests could not be fitted."""

from __future__ import annotations

from collections.abc import Callable, Collection

import polars as pl

from pool_registry import Registry
from replay.calibrate.carry import carried
from replay.calibrate.evidence import Bench, Evidence, Trace
from replay.calibrate.fit import fit_group
from replay.calibrate.notes import say_unusable, unusable_reason
from replay.calibrate.record import PoolFit
from replay.candidate import Candidate
from replay.exceptions import ReplayError
from replay.fleet import PoolSpec, pools_by_id


def calibrate(requests: pl.DataFrame | None, registry: Registry, *, bench: pl.DataFrame | None = None,
              base: Candidate | None = None, progress: Callable[[float, str], None] | None = None,
              carry: bool = False, pools: Collection[str] | None = None,
              ) -> tuple[tuple[PoolFit, ...], dict[str, int]]:
    """Fit every pool that has evidence (of `pools` alone when given), pools of one chip and engine together; also
    return counts of observed pools the fleet does not serve. `progress(share done, what)` hears of each group
    before its fit starts; pools without evidence take their chip and engine's fit, and with `carry` pools on chips
    without evidence a fitted pool's of the same engine."""
    observed = None
    if requests is not None:
        if "obs_pool" not in requests.columns or requests.filter(pl.col("obs_pool").is_not_null()).height == 0:
            raise ReplayError("no request has an observed pool (obs_pool), so there is nothing to calibrate")
        observed = requests.filter(pl.col("obs_pool").is_not_null())
    if observed is None and bench is None:
        raise ReplayError("nothing to calibrate from: give observed requests or a benchmark table")
    specs = pools_by_id(registry, base or Candidate(name="calibrate"))
    for pid in pools or ():
        if pid not in specs:
            raise ReplayError(f"unknown pool {pid!r} to calibrate; replayable: {', '.join(specs)}")
    unknown: dict[str, int] = {}
    by_pool: dict[str, pl.DataFrame] = {}
    unusable: dict[str, str] = {}
    if observed is not None:
        for (pool_id,), rows in observed.sort("arrival_ms").group_by("obs_pool", maintain_order=True):
            if str(pool_id) not in specs:
                unknown[str(pool_id)] = rows.height
            elif (why := unusable_reason(str(pool_id), rows)) is not None:
                unusable[str(pool_id)] = why
            else:
                by_pool[str(pool_id)] = rows
    tables: dict[str, pl.DataFrame] = {}
    if bench is not None:
        bad = bench.filter(~pl.col("pool").is_in(list(specs)))
        if bad.height:
            raise ReplayError(f"benchmark table line {bad['line'][0]}: column pool: unknown pool "
                              f"'{bad['pool'][0]}'; replayable: {', '.join(specs)}")
        tables = {str(k[0]): v for k, v in bench.group_by("pool", maintain_order=True)}
    if pools is not None:  # another pool's evidence is not this fit's, whatever chip it shares
        specs = {pid: spec for pid, spec in specs.items() if pid in pools}
    groups: dict[tuple[str, str], list[PoolSpec]] = {}
    for pid, spec in specs.items():
        if pid in by_pool or pid in tables:
            serving = registry.pool(pid).serving
            groups.setdefault((spec.chip.id, serving.engine if serving else ""), []).append(spec)
    if pools is not None and not groups and not any(p in unusable for p in specs):
        raise ReplayError(f"nothing to calibrate {', '.join(specs)} from: no observed requests and no benchmark "
                          "rows of these pools")
    fits = []
    for k, members in enumerate(groups.values()):
        if progress:
            progress(k / len(groups), f"fitting {', '.join(s.id for s in members)} ({k + 1} of {len(groups)})")
        evidence: dict[str, Evidence] = {}
        for spec in members:
            seen, bench_rows = by_pool.get(spec.id), tables.get(spec.id)
            evidence[spec.id] = (Trace(spec, seen) if seen is not None and seen.height else None,
                                 Bench(bench_rows) if bench_rows is not None and bench_rows.height else None)
        fits.extend(fit_group(members, evidence))
    fits.extend(carried(tuple(fits), registry, specs, chips=carry))
    fits = say_unusable(fits, {p: why for p, why in unusable.items() if p in specs})
    if progress:
        progress(1.0, "done")
    return tuple(fits), unknown
