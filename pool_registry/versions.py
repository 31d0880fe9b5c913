"""Version strings and requirement specifiers such as '>=0.15,<0.16' or '==8.0.*'.

PEP 440 versions are compared by `packaging`; vendor strings it cannot read ('113-M3000100-102', '24.1.rc3'
pinned exactly) fall back to a numeric-part comparison, so a driver or firmware pin still works.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

_OPS = ("==", "!=", ">=", "<=", "~=", ">", "<")
_CLAUSE = re.compile(r"^\s*(==|!=|>=|<=|~=|>|<)\s*([0-9A-Za-z.*+_-]+)\s*$")


class SpecifierError(ValueError):
    """A requirement string that cannot be parsed."""


def version_key(version: str) -> tuple[tuple[int, str], ...]:
    """Sort key: numeric parts compare as numbers, the rest as text ('550.144.03' > '550.54.15')."""
    parts = re.split(r"[.\-+_]", version.strip().lstrip("vV"))
    return tuple((int(p), "") if p.isdigit() else (-1, p) for p in parts if p != "")


@dataclass(frozen=True)
class Clause:
    """One comparison such as '>=0.15'."""

    op: str
    version: str

    def allows(self, version: str) -> bool:
        """True when the version satisfies this clause."""
        if self.version.endswith(".*"):
            prefix = version_key(self.version[:-2])
            head = version_key(version)[: len(prefix)]
            equal = head == prefix
            return equal if self.op == "==" else not equal
        have, want = version_key(version), version_key(self.version)
        if self.op == "~=":
            upper = want[:-1]
            return have >= want and have[: len(upper)] == upper
        return {
            "==": have == want, "!=": have != want, ">=": have >= want,
            "<=": have <= want, ">": have > want, "<": have < want,
        }[self.op]


def parse_specifier(spec: str) -> tuple[Clause, ...]:
    """Parse a comma-separated list of clauses; raise SpecifierError on anything else."""
    clauses = []
    for raw in spec.split(","):
        m = _CLAUSE.match(raw)
        if not m:
            raise SpecifierError(
                f"bad version requirement {raw.strip()!r}; expected clauses like '>=0.15,<0.16' "
                f"with operators {' '.join(_OPS)}"
            )
        op, ver = m.groups()
        if ver.endswith(".*") and op not in ("==", "!="):
            raise SpecifierError(f"wildcard version {ver!r} only works with == or !=")
        clauses.append(Clause(op, ver))
    return tuple(clauses)


def satisfies(version: str, spec: str) -> bool:
    """True when version meets every clause of spec."""
    clauses = parse_specifier(spec)
    try:
        # pre-releases count: a vendor build such as 24.1.rc3 is what the node really runs
        return SpecifierSet(spec).contains(Version(version.strip()), prereleases=True)
    except (InvalidSpecifier, InvalidVersion):
        return all(c.allows(version) for c in clauses)
