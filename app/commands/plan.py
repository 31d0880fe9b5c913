"""hetpool plan --model ID: the day-0 planner's TP x PP x EP layouts per pool, ranked, and --write of the best."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.commands._base import Context, add_command
from app.commands._choices import PLAN_CONCURRENCY
from app.exceptions import UsageError

if TYPE_CHECKING:
    from pool_registry import Registry

# The functions import the layers they use, so that `hetpool plan --help` loads none of them.

NO_PLAN = 1  # no layout fits, or none meets the targets


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """Add the plan command."""
    p = add_command(sub, "plan", help="propose TP x PP x EP layouts of a model on each pool: memory per device, "
                                      "TTFT/TPOT and cost from the replay's step model, best first",
                    example="hetpool plan --model llama-3.1-70b --isl 1024 --osl 128 --concurrency 16,64 "
                            "--tpot-ms 40\n  hetpool plan --model llama-3.1-70b --pool h100-a --write planned.yaml",
                    handler=run, common=common)
    p.add_argument("--model", required=True, metavar="ID", help="model id from the registry")
    p.add_argument("--pool", action="append", default=[], metavar="ID", help="plan on this pool (repeatable; "
                                                                            "default: every pool)")
    p.add_argument("--context", type=int, metavar="N", help="KV cache tokens each running sequence must hold "
                                                            "(default: isl + osl)")
    p.add_argument("--isl", type=int, default=1024, metavar="N", help="prompt tokens per request (default 1024)")
    p.add_argument("--osl", type=int, default=128, metavar="N", help="output tokens per request (default 128)")
    p.add_argument("--ttft-ms", type=float, metavar="MS", help="target median time to first token")
    p.add_argument("--tpot-ms", type=float, metavar="MS", help="target median time per output token")
    p.add_argument("--concurrency", type=_int_list, default=list(PLAN_CONCURRENCY), metavar="N[,N...]",
                   help="running sequences per replica, as replay bench counts them (default "
                        f"{','.join(map(str, PLAN_CONCURRENCY))})")
    p.add_argument("--registry", metavar="FILE", help="plan on this registry file instead of the stored one")
    p.add_argument("--candidate", metavar="FILE", help="a calibrated candidate (replay calibrate --out) whose "
                                                       "coefficients replace the registry's")
    p.add_argument("--write", metavar="FILE", help="write a copy of the registry with the best plan as its "
                                                   "pool's serving block")
    p.add_argument("--top", type=int, default=20, metavar="N", help="rows of each table printed (default 20; 0: "
                                                                    "all); --json has every plan")


def _int_list(text: str) -> list[int]:
    from replay.bench import concurrency_levels

    try:
        return list(concurrency_levels(text))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _registry(ctx: Context) -> tuple[Registry, dict[str, Any], Path | None]:
    """The registry to plan on, its data in the file's shape, and the folder its evidence paths are relative to."""
    import yaml

    from pool_registry import RegistryError, load_registry, registry_to_dict
    from pool_registry.yamlread import read_text
    from store import latest_registry

    path = ctx.args.registry
    if path:
        reg = load_registry(path)
        data = yaml.safe_load(read_text(path, RegistryError))
        return reg, data, Path(path).parent
    with ctx.store().read() as con:
        snap = latest_registry(con)
    if snap is None:
        raise UsageError("no registry loaded; run 'hetpool registry load examples/fleet.yaml' first, or pass "
                         "--registry FILE")
    source = Path(snap.source)
    return snap.registry, registry_to_dict(snap.registry), source.parent if source.is_file() else None


def run(ctx: Context) -> int:
    """Plan, print best first, optionally write the best plan into a registry copy; exit 1 when nothing serves."""
    from replay import load_candidate
    from replay.planner import (
        PlanError,
        PlanSettings,
        Targets,
        coefficients_of,
        plan_model,
        rebase_evidence,
        registry_with_plan,
        report_dict,
        report_lines,
    )

    args = ctx.args
    reg, data, base = _registry(ctx)
    candidate = load_candidate(args.candidate, reg) if args.candidate else None
    settings = PlanSettings(isl=args.isl, osl=args.osl, context=args.context, concurrency=tuple(args.concurrency),
                            targets=Targets(args.ttft_ms, args.tpot_ms))
    report = plan_model(reg, args.model, tuple(args.pool), settings, candidate)
    lines = report_lines(report, args.top)
    best = report.best
    if args.write:
        if best is None:
            raise PlanError(f"nothing to write to {args.write}: no layout fits"
                            + (" and meets the targets" if settings.targets.any else ""))
        out = Path(args.write)
        out.parent.mkdir(parents=True, exist_ok=True)
        if base is not None:
            data = rebase_evidence(data, base, out.parent)
        text = registry_with_plan(reg, data, report.model, best, coefficients_of(reg.pool(best.layout.pool),
                                                                                 candidate), str(out))
        replicas = f"{best.layout.replicas} replica{'s' if best.layout.replicas > 1 else ''}"
        out.write_text(f"# {reg.name} with {report.model} planned on {best.layout.pool} ({best.layout.label}, "
                       f"{replicas}, concurrency {best.concurrency}) by hetpool plan\n" + text)
        lines.append(f"wrote {out}: {best.layout.pool} serves {report.model} as {replicas} of {best.layout.label} "
                     f"at max_concurrency {best.concurrency}")
    ctx.emit(report_dict(report), "\n".join(lines))
    return 0 if best is not None else NO_PLAN
