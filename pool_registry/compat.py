"""Model x pool compatibility, the parts the registry alone answers: a model's required versions against a pool's
stack, and its number formats against the chip. Whether the model fits the pool's memory is the planner's
question; `replay.planner.compat` asks it and gives the one verdict every face shows."""

from __future__ import annotations

from dataclasses import dataclass

from pool_registry.components import FRAMEWORK_GROUPS, group_of
from pool_registry.model import Chip, Model, Pool
from pool_registry.versions import satisfies

PASS, FAIL, HW_INCOMPATIBLE, FRAMEWORK_INCOMPATIBLE = "PASS", "FAIL", "HW_INCOMPATIBLE", "FRAMEWORK_INCOMPATIBLE"
# When several checks fail the cell shows the one hardest to fix: new hardware before a new engine before a bump.
STATUSES = (HW_INCOMPATIBLE, FRAMEWORK_INCOMPATIBLE, FAIL, PASS)
MEANINGS = {
    PASS: "every requirement met, and a layout of the pool holds the model",
    FAIL: "a driver or runtime requirement unmet, or the configured replica too small while another layout fits",
    FRAMEWORK_INCOMPATIBLE: "the framework or serving engine missing or outside the requirement",
    HW_INCOMPATIBLE: "a number format the chip lacks, or no layout of the pool holds the model",
}


@dataclass(frozen=True)
class Compat:
    """One cell of the model x pool grid: the verdict, every failing requirement as text, and the smallest layout
    of the pool that holds the model ('' when none does)."""

    model: str
    pool: str
    status: str
    reasons: tuple[str, ...] = ()
    serves: bool = False  # the pool is configured to serve this model
    layout: str = ""

    @property
    def ok(self) -> bool:
        """True when every check passed."""
        return self.status == PASS

    @property
    def requirement(self) -> str:
        """The failing requirements joined into one line ('' when the cell passes)."""
        return "; ".join(self.reasons)


def requirements(model: Model, pool: Pool) -> tuple[list[str], list[str]]:
    """Each required version the pool's stack misses: (framework and serving engine ones, the others)."""
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
    return framework, other


def formats(model: Model, pool: Pool, chip: Chip) -> list[str]:
    """The model's weight format and the pool's KV cache format, where the chip does not support them."""
    out = []
    if model.dtype and model.dtype not in chip.supported_dtypes:
        out.append(f"dtype {model.dtype} is not supported by {chip.id} (supports {', '.join(chip.supported_dtypes)})")
    kv_dtype = pool.serving.kv_cache_dtype if pool.serving else "auto"
    if kv_dtype != "auto" and kv_dtype.split("_")[0] not in chip.supported_dtypes:
        out.append(f"kv_cache_dtype {kv_dtype} is not supported by {chip.id}")
    return out


def verdict(model: Model, pool: Pool, hardware: list[str], configured: list[str], layout: str = "") -> Compat:
    """The cell from the hardware reasons (formats, memory), the configured replica's (a served model whose
    replica is too small while another layout fits) and the pool's stack against the model's requirements."""
    framework, other = requirements(model, pool)
    reasons = tuple(hardware + framework + configured + other)
    status = (HW_INCOMPATIBLE if hardware else FRAMEWORK_INCOMPATIBLE if framework else
              FAIL if configured or other else PASS)
    serves = pool.serving is not None and pool.serving.model == model.id
    return Compat(model.id, pool.id, status, reasons, serves, layout)
