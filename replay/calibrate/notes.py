"""The English a calibration writes beside its numbers: why a pool was not fitted, what a carried fit can be
trusted for, which rows outgrow the cache, which hop latency stands in for an undeclared one."""

from __future__ import annotations

import dataclasses

import polars as pl

from replay.bench import STATISTICS
from replay.calibrate.evidence import MIN_GROUP, Bench, kv_bound
from replay.calibrate.record import EXPLAINS, PHYSICAL_MIN, PoolFit
from replay.calibrate.start import tp_of, undeclared_hop
from replay.costmodel import step_model
from replay.fitting import LATE, apply
from replay.fleet import PoolSpec
from replay.hops import TypicalHop


def typical_note(spec: PoolSpec, typical: TypicalHop) -> str:
    link = spec.chip.interconnect.kind
    return (f"{spec.chip.id}'s interconnect ({link}) declares no latency per hop (interconnect.latency_us), and this "
            f"evidence cannot fit one: collective_us is {typical.family}'s typical {typical.hop_us:.3g} us "
            f"({typical.source}); declare the link's own to replace it")


def kv_note(spec: PoolSpec, rows: list[tuple[int, int, int]]) -> list[str]:
    # past the cache the model queues admissions, and a median there jumps by whole passes as a coefficient
    # moves: such rows pin the coefficients less well than rows that fit, and can hold a search in a false valley
    bound = kv_bound(spec, rows)
    if not bound:
        return []
    isl, osl, c = bound[0]
    return [f"{len(bound)} of {len(rows)} benchmark rows of {spec.id} need more KV cache than a replica holds "
            f"(concurrency x (ISL + OSL) above {spec.kv_capacity_tokens} tokens, first: ISL {isl}, OSL {osl} at "
            f"concurrency {c}): there requests wait for the cache, and such rows pin the coefficients less well "
            "than rows that fit"]


STATISTIC_GAP = 1.2  # a row's replayed mean TTFT this far from its median makes "which figure is it?" matter
UNSAID_STATISTIC = "do not say which figure of their requests they give"  # the note's words, which the console finds


def statistic_note(spec: PoolSpec, table: Bench) -> list[str]:
    """That rows which do not say their statistic were compared as medians, where the replayed mean TTFT is far
    from the median (a lockstep client's first wave is in its mean only)."""
    if not table.unsaid:
        return []
    figures = table.means_and_medians(spec, table.unsaid)
    gap, k, mean, median = max((m / md if md > 0 else 1.0, k, m, md)
                               for k, (m, md) in zip(table.unsaid, figures, strict=True))
    if gap < STATISTIC_GAP:
        return []
    isl, osl, c = table.rows[k]
    return [f"{len(table.unsaid)} of {len(table.rows)} benchmark rows of {spec.id} {UNSAID_STATISTIC} (column "
            f"statistic: {', '.join(STATISTICS)}) and were compared as medians; replayed as "
            f"their client ran, the mean TTFT is up to {gap:.1f}x the median (ISL {isl}, OSL {osl} at concurrency "
            f"{c}: {mean:.0f} ms against {median:.0f} ms), so rows of means read as medians would fit the wrong "
            "coefficients without a sign"]


def unusable_reason(pool_id: str, rows: pl.DataFrame) -> str | None:
    """Why a pool's observed requests cannot be fitted (too few served with a TTFT), or None."""
    ttft = pl.col("obs_ttft_s")
    has_ttft = ttft.is_not_null() & ttft.is_not_nan() & (ttft > 0)
    failed = (pl.col("outcome").fill_null("ok") != "ok") if "outcome" in rows.columns else pl.lit(False)
    ok, bad = rows.select(has_ttft.and_(~failed).sum(), failed.sum()).row(0)
    if ok >= MIN_GROUP:
        return None
    why = f"{bad} failed, {rows.height - bad - ok} without a TTFT"
    if not ok:
        return (f"none of the {rows.height} observed requests of {pool_id} can be fitted ({why}): pick a window "
                "where the pool served requests")
    return (f"only {ok} of the {rows.height} observed requests of {pool_id} can be fitted ({why}), fewer than the "
            f"{MIN_GROUP} a fit compares at least: pick a longer window")


def say_unusable(fits: list[PoolFit], unusable: dict[str, str]) -> list[PoolFit]:
    """Put each pool's reason its requests were not fitted first in its notes, or in a line of its own."""
    out = [dataclasses.replace(f, notes=(unusable[f.pool], *f.notes)) if f.pool in unusable else f for f in fits]
    have = {f.pool for f in fits}
    return out + [PoolFit(pool=p, n_ttft=0, n_tpot=0, n_bench=0, mfu=None, mem_bw_eff=None, step_overhead_ms=None,
                          ttft_mape=None, ttft_r2=None, tpot_mape=None, tpot_r2=None, notes=(why,), group=(p,))
                  for p, why in unusable.items() if p not in have]


def same_chip_trust(src: PoolFit, spec: PoolSpec, specs: dict[str, PoolSpec]) -> str:
    """How far a fit carried to another pool of its chip and engine is to be trusted, from what it was fitted on."""
    degrees = sorted({tp_of(specs[p]) for p in src.group if p in specs})
    shown = ", ".join(f"TP{t}" for t in degrees)
    text = (f"carried from {src.pool} (the fit of {spec.chip.id} on this engine at {shown}) to TP{tp_of(spec)}: "
            f"expect at least its fit error (TPOT MAPE {pct(src.tpot_mape)}, TTFT MAPE {pct(src.ttft_mape)})")
    # (a decode at the prefill's share of peak is the model without mfu_decode, not a registry figure)
    kept = [c.name for c in src.coefficients if c.status == "not identifiable" and c.value is not None]
    # the engine's time per prompt chunk does not tell TP degrees apart: said on its own
    late = [n for n in kept if n in LATE]
    kept = [n for n in kept if n not in LATE]
    if late:
        text += f"; {', '.join(late)} kept the registry's value (not identifiable from the fitted rows)"
    if tp_of(spec) not in degrees and len(degrees) == 1:
        # at one degree the time that shrinks with TP and the time that does not add up the same way
        text += ("; fitted at one TP degree, it cannot tell time that does not shrink with TP (engine time per "
                 "step and per sequence, the link's hop latency) from work that does (a serial share of memory and "
                 "compute)")
        text += f", so {', '.join(kept)} kept the registry's value" if kept else ""
        text += sequence_band(src, apply(spec, src.values()), degrees[0])
        text += f": check it with one benchmark row at TP{tp_of(spec)}, or fit two TP degrees together"
    elif kept:
        text += f"; {', '.join(kept)} kept the registry's value (not identifiable from the fitted rows)"
    typical = undeclared_hop(spec)
    if tp_of(spec) > 1 and typical is not None and src.collective_us == typical.hop_us:
        text += (f"; {spec.chip.id}'s interconnect declares no latency per hop (interconnect.latency_us), so "
                 f"TP{tp_of(spec)}'s all-reduces pay {typical.family}'s typical {typical.hop_us:.3g} us a hop")
    elif tp_of(spec) > 1 and not src.collective_us:
        text += (f"; {spec.chip.id}'s interconnect declares no latency per hop (interconnect.latency_us), so "
                 f"TP{tp_of(spec)}'s all-reduces cost their bytes alone")
    return text


def sequence_time_as_work(spec: PoolSpec, from_tp: int, seqs: int, context: int) -> tuple[float, float]:
    """Seconds of one decode pass of `seqs` sequences of `context` tokens on a pool carried from TP `from_tp`: with
    its time per running sequence as engine time (as carried), and as work its TP spreads (times from_tp / TP)."""
    def one(pool: PoolSpec) -> float:
        return step_model(pool).pass_seconds(seqs, seqs, seqs * context, seqs, seqs * context)
    return one(spec), one(apply(spec, {"seq_overhead_us": spec.seq_overhead_us * from_tp / tp_of(spec)}))


def sequence_band(src: PoolFit, spec: PoolSpec, from_tp: int) -> str:
    """What the carried time per sequence would change at the largest batch the evidence ran, were it work."""
    if not spec.seq_overhead_us:
        return ""
    want, context = spec.max_concurrency, 1024  # a trace: a full batch of 1,024-token contexts
    if src.checks:
        row = max(src.checks, key=lambda c: (c.concurrency, c.isl + c.osl))
        want, context = row.concurrency, row.isl + row.osl // 2
    seqs = max(1, min(want, spec.max_concurrency, spec.kv_capacity_tokens // context))  # as far as the cache holds
    carried, work = sequence_time_as_work(spec, from_tp, seqs, context)
    change = work / carried - 1.0
    if abs(change) < 0.01:
        return ""
    return (f"; if its {spec.seq_overhead_us:.0f} us per running sequence is work that TP spreads, a decode pass "
            f"of {seqs} sequences of {context} tokens takes {work * 1e3:.1f} ms at TP{tp_of(spec)} rather than "
            f"{carried * 1e3:.1f} ms ({change * 100:+.0f} %), and TPOT at that batch lies between the two")


def pct(x: float | None) -> str:
    return "-" if x is None else f"{x * 100:.1f} %"


def unexplained_note(pool: str, ttft_md: float | None, tpot_md: float | None, worst: list[tuple[float, str]]) -> str:
    """That the model cannot explain a pool's own rows, with the medians against their limits and the worst rows."""
    medians = ", ".join(f"{kind} {pct(md)} (limit {pct(EXPLAINS[kind])})"
                        for kind, md in (("TTFT", ttft_md), ("TPOT", tpot_md)) if md is not None)
    return (f"the model cannot explain {pool}'s own rows: in-sample median error {medians}; its coefficients "
            f"describe the miss, not the machine. Worst: {'; '.join(text for _, text in worst)}")


def unphysical_note(name: str, value: float) -> str:
    """A fitted coefficient below what silicon sustains, reported as the sign of a missing term it is."""
    return (f"fitted {name} {value:.3g} is below {PHYSICAL_MIN[name]:g}, a share of peak no working engine runs "
            "at: a sign of a term the model lacks (engine time, a collective, arrivals or the schedule) folded into "
            f"{name}, not a measurement of the chip")
