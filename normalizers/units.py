"""Source units and their factor to each canonical unit (MiB -> bytes, mW -> W, % -> ratio, ...)."""

from __future__ import annotations

# unit name -> (canonical unit, factor). A vendor's "MB" of device memory is MiB in practice
# (an Ascend 910B reports 65536 for 64 GiB), so profiles say MiB there; MB stays SI here.
UNITS: dict[str, tuple[str, float]] = {
    "ratio": ("ratio", 1.0),
    "percent": ("ratio", 0.01),
    "bytes": ("bytes", 1.0),
    "KiB": ("bytes", 1024.0),
    "MiB": ("bytes", 1024.0**2),
    "GiB": ("bytes", 1024.0**3),
    "KB": ("bytes", 1e3),
    "MB": ("bytes", 1e6),
    "GB": ("bytes", 1e9),
    "W": ("W", 1.0),
    "mW": ("W", 1e-3),
    "uW": ("W", 1e-6),
    "celsius": ("celsius", 1.0),
    "Hz": ("Hz", 1.0),
    "kHz": ("Hz", 1e3),
    "MHz": ("Hz", 1e6),
    "GHz": ("Hz", 1e9),
    "bool": ("bool", 1.0),
    "count": ("count", 1.0),
    "J": ("J", 1.0),
    "mJ": ("J", 1e-3),
    "uJ": ("J", 1e-6),
    "bytes/s": ("bytes/s", 1.0),
    "KB/s": ("bytes/s", 1e3),
    "MB/s": ("bytes/s", 1e6),
    "GB/s": ("bytes/s", 1e9),
    "KiB/s": ("bytes/s", 1024.0),
    "MiB/s": ("bytes/s", 1024.0**2),
    "s": ("s", 1.0),
    "ms": ("s", 1e-3),
    "us": ("s", 1e-6),
    "ns": ("s", 1e-9),
}


def factor(unit: str, canonical_unit: str) -> float | None:
    """Multiplier from a source unit to a canonical unit, or None when they measure different things."""
    target, mult = UNITS.get(unit, ("", 0.0))
    return mult if target == canonical_unit else None


def units_for(canonical_unit: str) -> list[str]:
    """Source units that convert to a canonical unit (for error messages)."""
    return [u for u, (target, _) in UNITS.items() if target == canonical_unit]
