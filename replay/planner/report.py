"""A plan report as `hetpool plan --json` emits it, as the table it prints, and as frames the console draws."""

from __future__ import annotations

from typing import Any

import polars as pl

from pool_registry.compat import Compat
from replay.planner.layouts import Excluded
from replay.planner.rank import Plan
from replay.planner.search import PlanReport

PLAN_KEYS = ("pool", "tp", "pp", "ep", "attention_dp", "replicas", "devices_per_replica", "weights_gb_per_device",
             "kv_tokens_per_replica", "fits", "concurrency", "ttft_ms_p50", "tpot_ms_p50", "output_tok_s_per_device",
             "usd_per_mtok", "meets_targets", "ttft_ms_p50_band", "tpot_ms_p50_band", "meets_in_band_only",
             "encode_ms_per_image")


def plan_dict(p: Plan) -> dict[str, Any]:
    """One plan with exactly the keys of PLAN_KEYS."""
    lay = p.layout
    return {"pool": lay.pool, "tp": lay.tp, "pp": lay.pp, "ep": lay.ep, "attention_dp": lay.attention_dp,
            "replicas": lay.replicas,
            "devices_per_replica": lay.devices_per_replica, "weights_gb_per_device": round(p.memory.weights_gb, 3),
            "kv_tokens_per_replica": p.memory.kv_tokens_per_replica, "fits": p.fits, "concurrency": p.concurrency,
            "ttft_ms_p50": p.ttft_ms_p50, "tpot_ms_p50": p.tpot_ms_p50,
            "output_tok_s_per_device": p.output_tok_s_per_device, "usd_per_mtok": p.usd_per_mtok,
            "meets_targets": p.meets_targets, "ttft_ms_p50_band": list(p.ttft_band) if p.ttft_band else None,
            "tpot_ms_p50_band": list(p.tpot_band) if p.tpot_band else None, "meets_in_band_only": p.meets_in_band_only,
            "encode_ms_per_image": p.encode_ms_per_image}


def excluded_dict(e: Excluded) -> dict[str, Any]:
    """One excluded layout: where, which rule, why."""
    lay = e.layout
    return {"pool": lay.pool, "tp": lay.tp, "pp": lay.pp, "ep": lay.ep, "attention_dp": lay.attention_dp,
            "rule": e.rule, "reason": e.reason}


def compat_dict(c: Compat) -> dict[str, Any]:
    """One compatibility verdict as `hetpool versions --json` and `hetpool plan --json` emit it."""
    return {"model": c.model, "pool": c.pool, "status": c.status, "serves": c.serves, "reasons": list(c.reasons),
            "layout": c.layout}


def report_dict(r: PlanReport) -> dict[str, Any]:
    """{"model", "plans", "excluded", "min_devices", "compatibility", "notes"}: the JSON of `hetpool plan --json`."""
    return {"model": r.model, "plans": [plan_dict(p) for p in r.plans],
            "excluded": [excluded_dict(e) for e in r.excluded],
            "min_devices": {w.pool: w.min_devices for w in r.walls},
            "compatibility": [compat_dict(c) for c in r.compat], "notes": list(r.notes)}


def compat_line(c: Compat) -> str:
    """A verdict in one line: 'mlu370-a: PASS on tp2 pp2 (4 devices)', or the status and its reasons."""
    served = " (served)" if c.serves else ""
    if c.ok:
        return f"{c.pool}{served}: {c.status} on {c.layout}"
    return f"{c.pool}{served}: {c.status}: {c.requirement}"


def _num(v: float | None, fmt: str) -> str:
    return "-" if v is None else format(v, fmt)


LAYOUT_WIDTH = 16  # 'tp8 pp1 ep8 dp8' and a space
HEADER = (f"{'pool':<12} {'layout':<{LAYOUT_WIDTH}} {'repl':>4} {'dev/r':>5} {'wgt GB/d':>8} {'KV tok/r':>9} "
          f"{'conc':>5} {'ttft p50':>8} {'p99':>8} {'tpot p50':>8} {'p99':>7} {'tok/s/dev':>9} {'$/Mtok':>8} "
          f"{'meets':>5}")


def plan_line(p: Plan) -> str:
    """One row of the table (times in ms)."""
    lay = p.layout
    return (f"{lay.pool:<12} {lay.label:<{LAYOUT_WIDTH}} {lay.replicas:>4} {lay.devices_per_replica:>5} "
            f"{p.memory.weights_gb:>8.1f} {p.memory.kv_tokens_per_replica:>9,} {p.concurrency:>5} "
            f"{_num(p.ttft_ms_p50, '.1f'):>8} {_num(p.ttft_ms_p99, '.1f'):>8} {_num(p.tpot_ms_p50, '.2f'):>8} "
            f"{_num(p.tpot_ms_p99, '.2f'):>7} {_num(p.output_tok_s_per_device, ',.0f'):>9} "
            f"{_num(p.usd_per_mtok, '.3f'):>8} {_meets(p):>5}")


def _meets(p: Plan) -> str:
    """'yes', 'no', or 'band': meets the targets at the fit's values but not across its band."""
    return "band" if p.meets_in_band_only else "yes" if p.meets_targets else "no"


def _band(band: tuple[float, float] | None) -> str:
    return "-" if band is None else f"{band[0]:.1f}-{band[1]:.1f}"


def report_lines(r: PlanReport, top: int = 20) -> list[str]:
    """The human report: settings, fitting plans best first (at most `top`, 0 for all), walls, misses, exclusions."""
    s = r.settings
    t = s.targets
    aims = ", ".join(x for x in (f"TTFT p50 <= {t.ttft_ms:g} ms" if t.ttft_ms is not None else "",
                                 f"TPOT p50 <= {t.tpot_ms:g} ms" if t.tpot_ms is not None else "") if x)
    order = "cheapest busy $/Mtok among those meeting " + aims if t.any else "output tokens/s per device"
    lines = [f"plan {r.model}: isl {s.isl}, osl {s.osl}, KV for {s.tokens_per_sequence:,} tokens per sequence, "
             f"concurrency {','.join(map(str, s.concurrency))}; best first by {order}"]
    fitting = [p for p in r.plans if p.fits]
    shown = fitting if top <= 0 else fitting[:top]
    if fitting:
        lines += [HEADER, *(plan_line(p) for p in shown)]
        banded = [p for p in shown if p.ttft_band or p.tpot_band]
        if banded:
            lines.append("p50 bands within the calibration's standard errors (meets 'band': only inside them):")
            lines += [f"  {p.layout.pool} {p.layout.label} at concurrency {p.concurrency}: TTFT {_band(p.ttft_band)} "
                      f"ms, TPOT {_band(p.tpot_band)} ms" for p in banded]
        if len(shown) < len(fitting):
            lines.append(f"... and {len(fitting) - len(shown)} more fitting plans (--top 0 shows all)")
        best = fitting[0].memory
        if best.encoder_gb:  # a vision-language model: its encoder's part of the weights each device holds
            per_image = fitting[0].encode_ms_per_image
            lines.append(f"vision encoder: {best.encoder_gb:.1f} of {best.weights_gb:.1f} GB of weights per device "
                         f"({best.encoder_gb / best.weights_gb:.0%}) on {fitting[0].layout.label}, first stage; "
                         + (f"{per_image:.1f} ms an image, " if per_image is not None else "")
                         + "which a replay adds to a request's TTFT and these text-only TTFTs leave out")
    else:
        lines.append("no layout fits memory on any pool planned")
    for w in r.walls:
        if not any(p.fits and p.layout.pool == w.pool for p in r.plans):
            need = "more devices than a device's working memory allows" if w.min_devices is None else \
                f"at least {w.min_devices} devices"
            has = "the pool has them (but no layout of them honours the rules)" if w.pool_has_them else \
                f"the pool has {w.devices}"
            lines.append(f"memory wall on {w.pool}: nothing fits; the model needs {need}; {has}")
    lines += [f"targets missed: {m}" for m in r.misses]
    lines += [f"note: {n}" for n in r.notes]
    if r.compat:
        lines.append(f"compatibility at {r.model}'s full context, one sequence (as hetpool versions):")
        lines += [f"  {compat_line(c)}" for c in r.compat]
    short = [p for p in r.plans if not p.fits]
    if short:
        lines.append("does not fit memory (per device: weights + KV + working memory against usable):")
        for p in short if top <= 0 else short[:top]:
            m = p.memory
            enc = f" (of which the vision encoder {m.encoder_gb:.1f})" if m.encoder_gb else ""
            lines.append(f"  {p.layout.pool} {p.layout.label} at concurrency {p.concurrency}: "
                         f"{m.weights_gb:.1f}{enc} + {m.kv_gb:.1f} + {m.working_gb:.1f} GB > {m.usable_gb:.1f} GB "
                         f"usable, short by {m.shortfall_gb:.1f} GB")
        if 0 < top < len(short):
            lines.append(f"  ... and {len(short) - top} more, further short")
    if r.excluded:
        lines.append("excluded layouts:")
        groups: dict[tuple[str, str, str], list[str]] = {}
        for e in r.excluded:
            groups.setdefault((e.layout.pool, e.rule, e.reason), []).append(e.layout.label)
        for (pool, rule, reason), labels in groups.items():
            lines.append(f"  {pool} {', '.join(labels)}: {rule}: {reason}")
    return lines


def plans_frame(r: PlanReport) -> pl.DataFrame:
    """One row per plan that fits, best first, with the p99s and the memory per device."""
    rows = [{**plan_dict(p), "layout": p.layout.label, "ttft_ms_p99": p.ttft_ms_p99, "tpot_ms_p99": p.tpot_ms_p99,
             "kv_gb_per_device": p.memory.kv_gb, "working_gb_per_device": p.memory.working_gb,
             "usable_gb_per_device": p.memory.usable_gb, "mfu": p.mfu} for p in r.plans if p.fits]
    return pl.DataFrame(rows, infer_schema_length=None) if rows else pl.DataFrame()


def memory_frame(p: Plan) -> pl.DataFrame:
    """One device's memory under a plan: part and GB (weights, a vision encoder's apart when the model has one, KV
    cache, working memory, free of the usable)."""
    m = p.memory
    encoder = [("vision encoder", m.encoder_gb)] if m.encoder_gb else []
    parts = [("weights", m.weights_gb - m.encoder_gb), *encoder, ("KV cache", m.kv_gb),
             ("working memory", m.working_gb), ("free", max(0.0, m.usable_gb - m.used_gb))]
    return pl.DataFrame({"part": [k for k, _ in parts], "gb": [v for _, v in parts]})
