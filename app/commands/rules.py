"""hetpool rules: the vendor profiles as Prometheus recording rules for the canonical series, plus fatal alerts."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from app.commands._base import Context, add_command
from app.exceptions import UsageError

if TYPE_CHECKING:
    from normalizers import Profile
    from normalizers.promrules import Placement
    from pool_registry import Registry
    from status.tsdb import StatusGroup

# The functions import the normalizers, registry, status rules and store, so that `hetpool rules --help` loads none.


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """Add the rules command."""
    p = add_command(sub, "rules",
                    help="compile the vendor profiles into Prometheus recording rules that produce the canonical "
                         "series under the feed's names and labels, and alerting rules for the fatal error classes",
                    example="hetpool rules --out hetpool-rules.yaml  # then: promtool check rules hetpool-rules.yaml\n"
                            "  hetpool rules --status-rules examples/site-rules.yaml --status-window 6h --out r.yaml",
                    handler=run, common=common)
    p.add_argument("--profiles-dir", type=Path, metavar="DIR",
                   help="profiles that add to or replace the shipped ones, as in 'hetpool ingest file' "
                        "(default: the shipped normalizers/profiles/ only)")
    p.add_argument("--registry", type=Path, metavar="FILE",
                   help="fleet YAML whose pools place the series (default: the newest registry loaded into --db)")
    p.add_argument("--pool-label", metavar="LABEL",
                   help="take each series' pool from this label of the raw series (a target label) instead of the "
                        "registry's assign rules; the registry, when there is one, still gives the vendor")
    p.add_argument("--out", type=Path, metavar="FILE", help="write the rules here (default: stdout)")
    p.add_argument("--status-rules", metavar="FILE",
                   help="site status rules over the shipped defaults, compiled into the group hetpool_status "
                        "(default: $HETPOOL_RULES)")
    p.add_argument("--status-window", default="24h", metavar="DURATION",
                   help="the window the status alerts judge, as the console's view does (default: 24h)")
    p.add_argument("--no-status", action="store_true",
                   help="leave out the group hetpool_status (the status rules as alerting rules)")


def _profiles(directory: Path | None) -> list[Profile]:
    from normalizers import load_profiles
    from normalizers.profile.sets import builtin_profiles, profiles_in
    from normalizers.promrules.placement import RulesError

    if directory is None:
        return builtin_profiles()
    if directory.is_dir() and not any(directory.glob("*.yaml")):
        raise RulesError(f"{directory}: no *.yaml profile files in this directory")
    profiles_in(directory)  # every problem of the directory's own files, naming the file, before merging
    return list(load_profiles([directory]).profiles.values())


def _registry(ctx: Context) -> Registry | None:
    from pool_registry import load_registry
    from store import latest_registry

    if ctx.args.registry is not None:
        return load_registry(ctx.args.registry)
    store = ctx.store()
    if not store.exists():
        return None
    with store.read() as con:
        snap = latest_registry(con)
    return snap.registry if snap is not None else None


def _placement(ctx: Context) -> Placement:
    from normalizers.promrules import LabelPlacement, RegistryPlacement

    registry = _registry(ctx)
    if ctx.args.pool_label is not None:
        return LabelPlacement(ctx.args.pool_label, registry)
    if registry is None:
        raise UsageError(f"no registry to place series in pools: none is loaded into {str(ctx.db_path)!r}; load one "
                         f"with 'hetpool registry load FILE', pass --registry FILE, or take pools from a label "
                         f"with --pool-label LABEL")
    return RegistryPlacement(registry)


def _status(ctx: Context, registry: Registry | None) -> StatusGroup:
    """The status rules' group (the site rules over the shipped ones) on --status-window."""
    from status.rules import load_rules
    from status.tsdb import status_group

    try:
        return status_group(load_rules(ctx.args.status_rules), registry, ctx.args.status_window)
    except ValueError as exc:
        raise UsageError(f"--status-window {ctx.args.status_window!r}: {exc}") from None


def run(ctx: Context) -> int:
    """Write the rules to --out or stdout; the summary goes to stdout with --out, else to stderr."""
    from normalizers.promrules import compile_rules
    from status.tsdb import GROUP

    profiles = _profiles(ctx.args.profiles_dir)
    placement = _placement(ctx)
    rules = compile_rules(profiles, placement)
    left: tuple[str, ...] = ()
    notes: list[str] = []
    if not ctx.args.no_status:
        compiled = _status(ctx, placement.registry)  # type: ignore[attr-defined]
        rules.groups.append(compiled.group)
        left = compiled.not_compiled
        notes = [f"# The group {GROUP}: the console's status rules as alerts on the last {ctx.args.status_window}; "
                 "not compiled:", *(f"#   {n}" for n in left)]
    head, body = rules.to_yaml().split("groups:\n", 1)
    text = head + "".join(f"{n}\n" for n in notes) + "groups:\n" + body
    out = ctx.args.out
    if out is not None:
        try:
            out.write_text(text, encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"cannot write {str(out)!r}: {exc.strerror or exc}") from None
    else:
        ctx.out.write(text)
    s = rules.summary()
    lines = [f"{s['recording_rules']} recording rules and {s['alerting_rules']} alerting rules from "
             f"{len(s['profiles'])} profiles ({', '.join(s['profiles'])})"
             + (f" written to {out}" if out is not None else "")]
    lines.extend(f"not compiled: {u}" for u in s["unsupported"])
    lines.extend(f"status rules not compiled: {u}" for u in left)
    if out is not None:
        ctx.emit(s, "\n".join(lines))
    else:
        for line in lines:
            ctx.note(line)
    return 0
