"""Evidence files from disk into the store: the registry's references, and files added from the command line."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path

import duckdb

from onboarding.errors import OnboardingError
from onboarding.evidence import LOADERS, parse_evidence
from pool_registry import Registry
from pool_registry.onboarding import FILE, ITEM_IDS, item_spec
from store.evidence import add_evidence


@dataclass(frozen=True)
class EvidenceFile:
    """A checked evidence file ready to store."""

    pool: str
    item: str
    role: str
    name: str
    body: str
    produced_at: dt.datetime | None


def read_file(pool: str, item: str, role: str, path: Path, name: str,
              produced_at: dt.datetime | None = None) -> EvidenceFile:
    """Read and check one file with its item's loader (EvidenceError names file, line and column)."""
    try:
        body = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise OnboardingError(f"{name}: file not found (evidence of {pool} {item})") from None
    except (IsADirectoryError, UnicodeDecodeError) as exc:
        raise OnboardingError(f"{name}: cannot read an evidence file ({exc})") from None
    parse_evidence(item, body, name)
    return EvidenceFile(pool, item, role, name, body, produced_at)


def registry_files(reg: Registry, base: Path) -> tuple[EvidenceFile, ...]:
    """Every evidence file the registry's checks name, read relative to `base` (the registry file's folder)."""
    out = []
    for pool in reg.pools:
        for check in pool.onboarding.checks.values():
            at = dt.datetime(check.at.year, check.at.month, check.at.day, tzinfo=dt.UTC) if check.at else None
            for role, written in check.files.items():
                path = Path(written) if Path(written).is_absolute() else base / written
                out.append(read_file(pool.id, check.item, role, path, str(path), at))
    return tuple(out)


def cli_files(reg: Registry, pool: str, item: str, paths: list[str]) -> tuple[EvidenceFile, ...]:
    """The files of `hetpool onboarding add-evidence POOL ITEM FILE...`, one per role of the item in order."""
    spec_roles = file_roles(reg, pool, item, len(paths))
    return tuple(read_file(pool, item, role, Path(p), p) for role, p in zip(spec_roles, paths, strict=True))


def uploaded_files(reg: Registry, pool: str, item: str, uploads: list[tuple[str, str]],
                   produced_at: dt.datetime | None = None) -> tuple[EvidenceFile, ...]:
    """Files given as (name, text), one per role of the item in order, checked as `cli_files` checks paths."""
    spec_roles = file_roles(reg, pool, item, len(uploads))
    out = []
    for role, (name, body) in zip(spec_roles, uploads, strict=True):
        parse_evidence(item, body, name)
        out.append(EvidenceFile(pool, item, role, name, body, produced_at))
    return tuple(out)


def file_roles(reg: Registry, pool: str, item: str, count: int) -> tuple[str, ...]:
    """The roles of the files an item of a pool takes, refusing an unknown pool or item or the wrong count."""
    if pool not in {p.id for p in reg.pools}:
        raise OnboardingError(f"unknown pool {pool!r}; known: {', '.join(p.id for p in reg.pools)}")
    if item not in ITEM_IDS:
        raise OnboardingError(f"unknown checklist item {item!r}; expected one of: {', '.join(ITEM_IDS)}")
    spec = item_spec(item)
    if spec.kind != FILE:
        raise OnboardingError(f"checklist item {item!r} is judged from {spec.kind} evidence, not a file; files go to: "
                              f"{', '.join(LOADERS)}")
    if count != len(spec.roles):
        raise OnboardingError(f"{item} takes {len(spec.roles)} file(s) ({', '.join(spec.roles)}), got {count}")
    return spec.roles


def store_files(con: duckdb.DuckDBPyConnection, files: tuple[EvidenceFile, ...], source: str) -> int:
    """Store the files (each unchanged one stores nothing) and return how many were new."""
    return sum(add_evidence(con, pool=f.pool, item=f.item, role=f.role, name=f.name, body=f.body,
                            produced_at=f.produced_at, source=source)[1] for f in files)
