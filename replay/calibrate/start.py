"""What a fit starts from: the registry's coefficients, the link family's typical hop latency where none is
declared, and the layout figures (hops per pass, TP degree) that decide what the evidence can identify."""

from __future__ import annotations

from replay.costmodel import Collectives
from replay.fitting import apply, prior
from replay.fleet import PoolSpec
from replay.hops import TypicalHop, typical_hop


def undeclared_hop(spec: PoolSpec) -> TypicalHop | None:
    """The typical hop latency of the pool's link family when neither the pool nor its chip declares one."""
    if spec.collective_us is not None or spec.chip.interconnect.latency_us:
        return None
    return typical_hop(spec.chip.interconnect.kind)


def start_values(spec: PoolSpec) -> dict[str, float | None]:
    """What a fit starts from and keeps where the evidence says nothing: the registry's values, with the link
    family's typical hop latency where neither the pool nor its chip declares one."""
    p = prior(spec)
    typical = undeclared_hop(spec)
    if typical is not None:  # 0 would make every TP degree's all-reduces as quick to synchronize as one's
        p["collective_us"] = typical.hop_us
    return p


def hops_us(spec: PoolSpec) -> float:
    """The collective hops each pass of the pool waits for: its collectives' fixed time at 1 us a hop, in us."""
    return Collectives.of(apply(spec, {"collective_us": 1.0})).fixed_s * 1e6


def tp_of(spec: PoolSpec) -> int:
    return max(1, spec.devices_per_replica // max(1, spec.pp))
