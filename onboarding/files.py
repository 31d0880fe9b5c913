"""Evidence files from disk into the store: the registry's references, and files added from the command line."""

from __future__ import annotations

import datetime as dt
import os
import stat
from dataclasses import dataclass
from pathlib import Path

import duckdb

from onboarding.evidence import LOADERS, parse_evidence
from onboarding.exceptions import OnboardingError
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


ENV_ROOT, ENV_MAX_MB = "HETPOOL_EVIDENCE_ROOT", "HETPOOL_MAX_EVIDENCE_MB"
DEFAULT_MAX_MB = 32
SYSTEM = (Path("/proc"), Path("/sys"), Path("/dev"))  # what the kernel serves as files, never evidence


def max_bytes() -> int:
    """The largest evidence file read: $HETPOOL_MAX_EVIDENCE_MB MiB (default 32)."""
    try:
        mb = float(os.environ.get(ENV_MAX_MB, DEFAULT_MAX_MB))
    except ValueError:
        raise OnboardingError(f"{ENV_MAX_MB}={os.environ.get(ENV_MAX_MB)!r}: expected a number of MiB") from None
    return int(mb * 2**20)


def read_file(pool: str, item: str, role: str, path: Path, name: str, produced_at: dt.datetime | None = None, *,
              root: Path | None = None) -> EvidenceFile:
    """Read and check one file with its item's loader (EvidenceError names file, line and column).

    Only a regular file is read, never one the kernel serves (/proc, /sys, /dev), at most max_bytes() of it, and
    with `root` only one that lies under it once links are followed; no error quotes more of the file than the
    offending field."""
    where = f"(evidence of {pool} {item})"
    try:
        info = os.stat(path)
        real = path.resolve()
    except FileNotFoundError:
        raise OnboardingError(f"{name}: file not found {where}") from None
    except OSError as exc:
        raise OnboardingError(f"{name}: cannot read an evidence file ({exc.strerror}) {where}") from None
    if not stat.S_ISREG(info.st_mode) or any(real.is_relative_to(s) for s in SYSTEM):
        raise OnboardingError(f"{name}: not a regular file {where}; evidence is a file of results")
    if root is not None and not real.is_relative_to(root.resolve()):
        raise OnboardingError(f"{name}: lies outside {root.resolve()} (it is {real}) {where}; evidence files are "
                              f"read under the registry's folder, or under ${ENV_ROOT}")
    cap = max_bytes()
    if info.st_size > cap:
        raise OnboardingError(f"{name}: {info.st_size:,} bytes exceed the evidence limit of {cap:,} bytes "
                              f"(${ENV_MAX_MB}) {where}")
    try:
        with open(real, "rb") as f:
            data = f.read(cap + 1)
    except OSError as exc:
        raise OnboardingError(f"{name}: cannot read an evidence file ({exc.strerror}) {where}") from None
    if len(data) > cap:
        raise OnboardingError(f"{name}: more than the evidence limit of {cap:,} bytes (${ENV_MAX_MB}) {where}")
    try:
        body = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise OnboardingError(f"{name}: not UTF-8 text (byte {exc.start}) {where}") from None
    parse_evidence(item, body, name)
    return EvidenceFile(pool, item, role, name, body, produced_at)


def evidence_root(base: Path) -> Path:
    """Where a registry's evidence files may lie: $HETPOOL_EVIDENCE_ROOT, else the registry file's folder."""
    chosen = os.environ.get(ENV_ROOT)
    return Path(chosen) if chosen else base


def registry_files(reg: Registry, base: Path) -> tuple[EvidenceFile, ...]:
    """Every evidence file the registry's checks name, read relative to `base` (the registry file's folder) and
    only under evidence_root(base)."""
    root = evidence_root(base)
    out = []
    for pool in reg.pools:
        for check in pool.onboarding.checks.values():
            at = dt.datetime(check.at.year, check.at.month, check.at.day, tzinfo=dt.UTC) if check.at else None
            for role, written in check.files.items():
                path = Path(written) if Path(written).is_absolute() else base / written
                out.append(read_file(pool.id, check.item, role, path, str(path), at, root=root))
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
    if spec.kind != FILE and not spec.evidence:
        raise OnboardingError(f"checklist item {item!r} is judged from {spec.kind} evidence, not a file; files go to: "
                              f"{', '.join(LOADERS)}")
    roles = spec.file_roles
    if count != len(roles):
        raise OnboardingError(f"{item} takes {len(roles)} file(s) ({', '.join(roles)}), got {count}")
    return roles


def store_files(con: duckdb.DuckDBPyConnection, files: tuple[EvidenceFile, ...], source: str) -> int:
    """Store the files (each unchanged one stores nothing) and return how many were new."""
    return sum(add_evidence(con, pool=f.pool, item=f.item, role=f.role, name=f.name, body=f.body,
                            produced_at=f.produced_at, source=source)[1] for f in files)
