"""The latency of one collective hop on a device link that declares none: what a calibration keeps for it.

A ring all-reduce of n devices takes 2(n - 1) steps, each paying a hop's latency beside its bytes, so a message
small enough to be latency-bound takes T = 2(n - 1) x hop. nccl-tests and rccl-tests report a bus bandwidth
busbw = (S / T) x 2(n - 1) / n for a message of S bytes, hence hop = S / (n x busbw). Evidence of one TP degree
cannot fit the hop latency (it adds a constant to every pass, as the engine's time per step does), so the value a
fit keeps decides how the all-reduces grow at the other degrees: 0, a link without latency, makes TP8 as cheap
to synchronize as TP2, which no link is. A link family measured in public gets its figure; others keep 0 and the
fit says so. A chip's own `interconnect.latency_us` always wins.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class TypicalHop:
    """A link family's latency per collective hop and the measurement it comes from."""

    family: str
    hop_us: float
    source: str


def _hop_us(message_bytes: float, devices: int, busbw_gbps: float) -> float:
    """The latency of one ring step from a latency-bound all-reduce's bus bandwidth: S / (n x busbw)."""
    return message_bytes / (devices * busbw_gbps * 1e9) * 1e6


# all-reduce of 1 KB over 8 devices of one node (Azure's AI benchmarking guide, ND H200 v5 and ND MI300X v5)
TYPICAL: dict[str, TypicalHop] = {
    "nvlink": TypicalHop("NVLink", _hop_us(1024, 8, 0.06),
                         "NCCL all-reduce of 1 KB over 8 H200 on NVLink 4: 0.06 GB/s bus bandwidth"),
    "infinity_fabric": TypicalHop("Infinity Fabric", _hop_us(1024, 8, 0.04),
                                  "RCCL all-reduce of 1 KB over 8 MI300X on Infinity Fabric: 0.04 GB/s bus bandwidth"),
}
# how registries spell the families: nvlink4, NVLink-5, nvswitch; xgmi, infinity-fabric, if
_FAMILIES = (("nvlink", ("nvlink", "nvswitch")), ("infinity_fabric", ("infinityfabric", "xgmi", "if")))


def family(kind: str) -> str | None:
    """The measured family of a link kind as a registry spells it, or None."""
    name = re.sub(r"[^a-z]", "", kind.lower())
    for fam, prefixes in _FAMILIES:
        if any(name.startswith(p) if p != "if" else name == p for p in prefixes):
            return fam
    return None


def typical_hop(kind: str) -> TypicalHop | None:
    """The typical hop latency of a link kind's family, or None where no public measurement gives one."""
    fam = family(kind)
    return TYPICAL[fam] if fam else None
