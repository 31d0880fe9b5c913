"""hetpool profile validate: check vendor profile YAML before an ingest reads it."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from app.commands._base import Context, add_command, add_group

if TYPE_CHECKING:
    from normalizers import Profile


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """Add the profile command group."""
    group = add_group(sub, "profile", help="check vendor exporter profiles")
    p = add_command(group, "validate", help="check one profile file, or every *.yaml in a directory, and list every "
                                            "problem with file, line and field",
                    example="hetpool profile validate normalizers/profiles/", handler=validate, common=common)
    p.add_argument("path", metavar="FILE|DIR", help="a profile YAML file or a directory of them")


def _counts(profile: Profile) -> dict[str, int]:
    return {"metrics": len(profile.metrics), "derived": len(profile.derived), "errors": len(profile.errors),
            "ignored": len(profile.ignore)}


def validate(ctx: Context) -> int:
    """Exit 0 when every profile is valid (one line each); else print every problem, one per line, and exit 2."""
    from normalizers import check_profiles  # here, not at the top: `hetpool profile --help` loads no layer

    valid, problems = check_profiles(ctx.args.path)
    found = [{"file": str(file), "profile": p.name, **_counts(p)} for file, p in valid]
    if ctx.as_json:
        ctx.emit({"valid": not problems, "profiles": found, "problems": [str(x) for x in problems]}, "")
    else:
        lines = [f"{file}: profile {p.name} valid ({c['metrics']} metrics, {c['derived']} derived, {c['errors']} "
                 f"errors, {c['ignored']} ignored)" for file, p in valid for c in (_counts(p),)]
        ctx.emit(None, "\n".join(lines))
        for problem in problems:
            print(problem, file=ctx.err)
    return 2 if problems else 0
