"""hetpool registry validate|load|show: the fleet description."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from app.commands._base import Context, add_command, add_group

if TYPE_CHECKING:
    from pool_registry import Registry

# Each handler imports the layers it uses, so that `hetpool registry ... --help` loads none of them.


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """Add the registry command group."""
    group = add_group(sub, "registry", help="validate, load and show the fleet registry")
    p = add_command(group, "validate", help="check a registry file and list every problem in it",
                    example="hetpool registry validate examples/fleet.yaml", handler=validate, common=common)
    p.add_argument("file", help="registry YAML file")
    p = add_command(group, "load", help="validate a registry file and store it as the current fleet",
                    example="hetpool registry load examples/fleet.yaml", handler=load, common=common)
    p.add_argument("file", help="registry YAML file")
    add_command(group, "show", help="print the fleet as last loaded into the database",
                example="hetpool registry show --json", handler=show, common=common)


def _summary(reg: Registry) -> str:
    return f"{len(reg.chips)} chips, {len(reg.models)} models, {len(reg.pools)} pools"


def validate(ctx: Context) -> int:
    """Exit 0 when valid; on problems print all of them, one per line, and exit 2."""
    from onboarding import OnboardingError
    from onboarding.files import registry_files
    from pool_registry import RegistryError, load_registry

    try:
        reg = load_registry(ctx.args.file)
        registry_files(reg, Path(ctx.args.file).parent)  # the onboarding evidence files it names must read too
    except (RegistryError, OnboardingError) as exc:
        problems = [str(p) for p in exc.problems] if isinstance(exc, RegistryError) else [str(exc)]
        if ctx.as_json:
            ctx.emit({"valid": False, "problems": problems}, "")
        else:
            for problem in problems:
                print(problem, file=ctx.err)
        return 2
    ctx.emit({"valid": True, "file": ctx.args.file, "chips": len(reg.chips), "models": len(reg.models),
              "pools": len(reg.pools)}, f"{ctx.args.file}: valid ({_summary(reg)})")
    return 0


def load(ctx: Context) -> int:
    """Validate, then store a snapshot (a no-op when nothing changed)."""
    from onboarding.files import registry_files, store_files
    from pool_registry import load_registry
    from pool_registry.yamlread import no_gc_pauses
    from store import save_registry

    with no_gc_pauses():  # a large registry's objects live to the end: no collection need walk them meanwhile
        reg = load_registry(ctx.args.file)
        files = registry_files(reg, Path(ctx.args.file).parent)  # checked before anything is written
        with ctx.store().transaction(f"hetpool registry load {ctx.args.file}") as con:
            snapshot_id, created = save_registry(con, reg, str(ctx.args.file))
            new_files = store_files(con, files, "registry")
    verb = "stored as snapshot" if created else "unchanged since snapshot"
    evidence = f"; {new_files} of {len(files)} onboarding evidence file(s) new" if files else ""
    ctx.emit({"snapshot_id": snapshot_id, "created": created, "pools": len(reg.pools), "evidence_files": len(files),
              "evidence_stored": new_files},
             f"{ctx.args.file}: {_summary(reg)}; {verb} #{snapshot_id} in {ctx.db_path}{evidence}")
    return 0


def show(ctx: Context) -> int:
    """Print the newest stored registry."""
    from pool_registry import registry_to_dict
    from store import require_registry

    with ctx.store().read() as con:
        reg = require_registry(con)
    lines = [f"fleet {reg.name}: {_summary(reg)}",
             f"{'pool':<12} {'chip':<14} {'devices':>7} {'$/hour':>9}  {'model':<18} stage"]
    for p in reg.pools:
        model = p.serving.model if p.serving else "-"
        lines.append(f"{p.id:<12} {p.chip:<14} {p.devices:>7} {p.hourly_cost:>9.2f}  {model:<18} "
                     f"{p.onboarding.stage}")
    ctx.emit(registry_to_dict(reg), "\n".join(lines))
    return 0
