"""Model x pool compatibility: a model's required versions and shape against a pool's stack and chip."""

from __future__ import annotations

from dataclasses import dataclass

from pool_registry.components import FRAMEWORK_GROUPS, group_of
from pool_registry.model import GB, KV_CACHE_DTYPES, Chip, Model, Pool, Registry
from pool_registry.versions import satisfies

PASS, FAIL, HW_INCOMPATIBLE, FRAMEWORK_INCOMPATIBLE = "PASS", "FAIL", "HW_INCOMPATIBLE", "FRAMEWORK_INCOMPATIBLE"
# When several checks fail the cell shows the one hardest to fix: new hardware before a new engine before a bump.
STATUSES = (HW_INCOMPATIBLE, FRAMEWORK_INCOMPATIBLE, FAIL, PASS)
DEFAULT_MEMORY_UTILIZATION = 0.9  # vLLM's default, for a pool with no serving config


@dataclass(frozen=True)
class Compat:
    """One cell of the model x pool grid: the verdict and every failing requirement as text."""

    model: str
    pool: str
    status: str
    reasons: tuple[str, ...] = ()
    serves: bool = False  # the pool is configured to serve this model

    @property
    def ok(self) -> bool:
        """True when every check passed."""
        return self.status == PASS

    @property
    def requirement(self) -> str:
        """The failing requirements joined into one line ('' when the cell passes)."""
        return "; ".join(self.reasons)


def check(model: Model, pool: Pool, chip: Chip) -> Compat:
    """Judge one model on one pool: chip dtypes, memory and context first, then each required version."""
    hw = _hardware(model, pool, chip)
    framework: list[str] = []
    other: list[str] = []
    for component, spec in sorted(model.requires.items()):
        have = pool.stack.get(component)
        is_framework = group_of(component) in FRAMEWORK_GROUPS
        if have is None:
            runs = ", ".join(f"{k} {v}" for k, v in sorted(pool.stack.items()) if group_of(k) in FRAMEWORK_GROUPS)
            reason = f"requires {component} {spec}; the pool's stack has no {component}"
            (framework if is_framework else other).append(reason + (f" (it runs {runs})" if runs else ""))
        elif not satisfies(have, spec):
            (framework if is_framework else other).append(f"requires {component} {spec}; the pool has {have}")
    reasons = tuple(hw + framework + other)
    status = HW_INCOMPATIBLE if hw else FRAMEWORK_INCOMPATIBLE if framework else FAIL if other else PASS
    serves = pool.serving is not None and pool.serving.model == model.id
    return Compat(model.id, pool.id, status, reasons, serves)


def compatibility(reg: Registry, pools: tuple[str, ...] | list[str] = ()) -> tuple[Compat, ...]:
    """Every model against every pool (or the pools named), in registry order."""
    return tuple(check(m, p, reg.chip_of(p)) for m in reg.models for p in reg.pools if not pools or p.id in pools)


def _hardware(model: Model, pool: Pool, chip: Chip) -> list[str]:
    out = []
    if model.dtype and model.dtype not in chip.supported_dtypes:
        out.append(f"dtype {model.dtype} is not supported by {chip.id} (supports {', '.join(chip.supported_dtypes)})")
    serving = pool.serving
    kv_dtype = serving.kv_cache_dtype if serving else "auto"
    if kv_dtype != "auto" and kv_dtype.split("_")[0] not in chip.supported_dtypes:
        out.append(f"kv_cache_dtype {kv_dtype} is not supported by {chip.id}")
    # The served model gets the configured replica; any other model the widest tensor-parallel group a node holds.
    served = serving is not None and serving.model == model.id
    devices = serving.devices_per_replica if serving and served else pool.devices_per_node
    share = serving.gpu_memory_utilization if serving else DEFAULT_MEMORY_UTILIZATION
    usable = chip.hbm_capacity_gb * GB * devices * share
    room = f"{devices} x {chip.hbm_capacity_gb:g} GB x {share:g} = {usable / GB:.1f} GB"
    kv_elem = KV_CACHE_DTYPES.get(kv_dtype) or model.kv_bytes_per_elem
    kv = model.kv_bytes_per_token / model.kv_bytes_per_elem * kv_elem * model.max_context
    if model.weight_bytes > usable:
        out.append(f"weights of {model.weight_bytes / GB:.1f} GB do not fit {room}")
    elif model.weight_bytes + kv > usable:
        out.append(f"context of {model.max_context} tokens needs {kv / GB:.1f} GB of KV cache beside "
                   f"{model.weight_bytes / GB:.1f} GB of weights; {room}")
    return out
