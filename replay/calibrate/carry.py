"""Fits for pools without evidence of their own: their chip and engine's fit, or with `chips` a fitted pool's of
the same engine on another chip, through the datasheets."""

from __future__ import annotations

import dataclasses

from pool_registry import Registry
from replay.calibrate.fit import fit_record
from replay.calibrate.notes import pct, same_chip_trust
from replay.calibrate.record import PoolFit
from replay.calibrate.start import undeclared_hop
from replay.fitting import apply
from replay.fleet import PoolSpec


def carried(fits: tuple[PoolFit, ...], registry: Registry, specs: dict[str, PoolSpec],
            chips: bool = False) -> list[PoolFit]:
    """Fits for pools without evidence: their chip and engine's fit (another TP degree or model of a fitted
    group); with `chips`, on chips without any evidence, a fitted pool's of the same engine through the datasheets."""
    engine = {pid: s.engine for pid in specs if (s := registry.pool(pid).serving) is not None}
    by_group: dict[tuple[str, str], PoolFit] = {}
    by_engine: dict[str, PoolFit] = {}
    for f in fits:
        if f.mfu is None or f.pool not in engine:
            continue
        by_group.setdefault((specs[f.pool].chip.id, engine[f.pool]), f)
        known = by_engine.get(engine[f.pool])
        if known is None or (f.tpot_mape or 1.0) < (known.tpot_mape or 1.0):
            by_engine[engine[f.pool]] = f
    fitted_chips = {specs[f.pool].chip.id for f in fits if f.pool in specs}
    out = []
    have = {f.pool for f in fits}
    for pid, spec in specs.items():
        if pid in have or pid not in engine:
            continue
        src = by_group.get((spec.chip.id, engine[pid]))
        if src is not None:
            trust = same_chip_trust(src, spec, specs)
            values = src.values()
        elif chips and spec.chip.id not in fitted_chips and engine[pid] in by_engine:
            src = by_engine[engine[pid]]
            values = src.values()
            if src.collective_us is not None and specs[src.pool].chip.interconnect.kind != spec.chip.interconnect.kind:
                values.pop("collective_us")  # another link: its own declared latency, else its family's
                if (typical := undeclared_hop(spec)) is not None:
                    values["collective_us"] = typical.hop_us
            trust = (f"carried from {src.pool} ({specs[src.pool].chip.id}, {engine[pid]}) through the datasheets: "
                     f"expect at least its fit error (TPOT MAPE {pct(src.tpot_mape)}, TTFT MAPE "
                     f"{pct(src.ttft_mape)}), more where this chip sustains another share of its peak; check it "
                     "with one benchmark row")
        else:
            continue
        best = apply(spec, values)
        out.append(dataclasses.replace(fit_record(spec, best, list(src.coefficients), (pid,), (), [trust], None, None,
                                               carried=src.pool), n_ttft=0))
    return out
