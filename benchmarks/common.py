"""Helpers shared by the benchmark scripts: timing, peak memory, thread limits, report lines."""

from __future__ import annotations

import os
import resource
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def single_core() -> None:
    """Pin the numeric libraries to one thread; call before importing polars or duckdb work starts."""
    for var in ("POLARS_MAX_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = "1"


def timed(fn: Callable[[], T], repeat: int = 1) -> tuple[float, T]:
    """Best wall time in seconds over `repeat` runs, and the last result."""
    best = float("inf")
    result: T
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def peak_rss_mib() -> float:
    """Peak resident memory of this process's own address space so far, in MiB."""
    # Not getrusage's ru_maxrss: Linux carries it across exec, so a process started by a large one (a test
    # worker, a benchmark driver) reports its parent's peak when that was higher. VmHWM belongs to this image.
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def report(name: str, value: float, unit: str, baseline: float | None = None, baseline_name: str = "") -> str:
    """One aligned line: value, and the ratio to a baseline measured in the same run."""
    line = f"{name:<44} {value:>14,.1f} {unit}"
    if baseline:
        line += f"   ({value / baseline:,.2f}x {baseline_name})"
    print(line, flush=True)
    return line
