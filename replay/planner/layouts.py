"""The parallel layouts of one replica of a model on a pool, and the divisibility rules that exclude some.

Tensor parallelism stays within a node (the chip's interconnect): tp runs over the divisors of devices per node.
Pipeline stages may span nodes over the node network: pp runs over powers of two while tp x pp devices fit the
pool. A mixture-of-experts model may also split its expert layers over the tensor-parallel group (ep = tp, as
vLLM's --enable-expert-parallel does); a dense model keeps ep = 1. With its experts so split, its attention may run
data-parallel beside them (SGLang's --enable-dp-attention, vLLM's --data-parallel-size with expert parallelism):
attention_dp groups of tp / attention_dp devices, over every divisor of tp above 1, each keeping its own copy of the
dense weights and the KV of its own sequences. What is left of the pool becomes data-parallel replicas.

A layout is excluded, naming its rule, when
- heads:    the attention heads do not split evenly over tp;
- kv_heads: tp neither divides the KV heads nor is a multiple of them (a multiple replicates each KV head over
            tp / kv_heads devices, as vLLM does);
- layers:   the layers do not split evenly into pp stages;
- experts:  the routed experts do not split evenly over ep;
- dtype:    the chip does not support the model's weight format (every layout of the pool).
Shape fields the registry does not declare (attention heads, experts) exclude nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from pool_registry import Chip, Model, Pool

RULES = ("heads", "kv_heads", "layers", "experts", "dtype")


@dataclass(frozen=True)
class Layout:
    """One replica's parallel layout on a pool, and how many replicas the pool holds."""

    pool: str
    tp: int
    pp: int
    ep: int
    replicas: int
    attention_dp: int = 1  # data-parallel attention groups of tp / attention_dp devices (MoE with ep > 1)

    @property
    def devices_per_replica(self) -> int:
        """Devices of one replica: tp x pp (expert parallelism reuses the tensor-parallel devices)."""
        return self.tp * self.pp

    @property
    def label(self) -> str:
        """Short name such as 'tp4 pp2 ep4', or 'tp8 pp1 ep8 dp8' with data-parallel attention."""
        return (f"tp{self.tp} pp{self.pp}" + (f" ep{self.ep}" if self.ep > 1 else "")
                + (f" dp{self.attention_dp}" if self.attention_dp > 1 else ""))


@dataclass(frozen=True)
class Excluded:
    """A layout a divisibility (or dtype) rule leaves out, with the rule's name and why."""

    layout: Layout
    rule: str
    reason: str


def divisors(n: int) -> list[int]:
    """The divisors of n in increasing order."""
    return [d for d in range(1, n + 1) if n % d == 0]


def candidates(pool: Pool, model: Model) -> list[Layout]:
    """Every layout of one replica the pool's shape allows, before the model's divisibility rules."""
    out = []
    for tp in divisors(pool.devices_per_node):
        pp = 1
        while tp * pp <= pool.devices:
            eps = [1, tp] if model.moe and tp > 1 else [1]
            replicas = pool.devices // (tp * pp)
            out += [Layout(pool.id, tp, pp, ep, replicas) for ep in eps]
            if model.moe and model.experts and tp > 1:  # attention data-parallel beside the experts split over tp
                out += [Layout(pool.id, tp, pp, tp, replicas, dp) for dp in divisors(tp)[1:]]
            pp *= 2
    return out


def rule_broken(layout: Layout, model: Model) -> tuple[str, str] | None:
    """(rule, reason) of the first divisibility rule the layout breaks, or None."""
    tp, pp, ep = layout.tp, layout.pp, layout.ep
    if model.attention_heads and model.attention_heads % tp:
        return "heads", f"{model.attention_heads} attention heads do not split over tp {tp}"
    if model.kv_heads % tp and tp % model.kv_heads:
        return "kv_heads", (f"{model.kv_heads} KV heads neither split over tp {tp} nor replicate evenly "
                            f"(tp is not a multiple of them)")
    if model.layers % pp:
        return "layers", f"{model.layers} layers do not split into {pp} pipeline stages"
    if ep > 1 and model.experts and model.experts % ep:
        return "experts", f"{model.experts} experts do not split over ep {ep}"
    return None


def enumerate_layouts(pool: Pool, chip: Chip, model: Model) -> tuple[list[Layout], list[Excluded]]:
    """The layouts that honour every rule, and those excluded with the rule each breaks."""
    kept: list[Layout] = []
    excluded: list[Excluded] = []
    for layout in candidates(pool, model):
        if model.dtype and model.dtype not in chip.supported_dtypes:
            excluded.append(Excluded(layout, "dtype", f"{chip.id} does not support the model's {model.dtype} "
                                                      f"weights (supports {', '.join(chip.supported_dtypes)})"))
            continue
        broken = rule_broken(layout, model)
        if broken:
            excluded.append(Excluded(layout, *broken))
        else:
            kept.append(layout)
    return kept, excluded
