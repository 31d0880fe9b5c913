"""The everyday errors of every pool: a few recoverable faults, informational notices, corrected ECC errors and
link replays, drawn where the devices report so that every vendor's error dialect shows up on the console.

Signals are vendor-neutral; each dialect writes them as its exporter does (an XID, an AMD field identifier, an
Ascend fault code, a Cambricon XID counter, a Gaudi ECC row counter).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from canonical.timeunits import MINUTE_MS

FAULTS = 2            # recoverable faults per pool over the window
NOTICES = 1           # informational codes per pool over the window
CORRECTED = 3         # corrected ECC bursts per pool
LINK_BURSTS = 2       # interconnect replay bursts per pool


@dataclass(frozen=True)
class Minor:
    """Shape (steps, devices): a recoverable fault or a notice reported (sticky), and cumulative counters."""

    fault: np.ndarray
    fault_count: np.ndarray   # faults begun so far, for exporters that count them instead
    notice: np.ndarray
    ecc_corrected: np.ndarray
    link_errors: np.ndarray


def minor_incidents(rng: np.random.Generator, present: np.ndarray, interval_ms: int) -> Minor:
    """A pool's minor incidents, each starting at a step where its device reports."""
    steps, devices = present.shape
    fault = np.zeros((steps, devices), dtype=bool)
    notice = np.zeros((steps, devices), dtype=bool)
    ecc = np.zeros((steps, devices))
    link = np.zeros((steps, devices))
    lo, hi = int(0.05 * steps), int(0.95 * steps)
    spots = np.argwhere(present[lo:hi]) + np.array([lo, 0])
    if len(spots) == 0:
        return Minor(fault, ecc.copy(), notice, ecc, link)
    per_minute = max(1, MINUTE_MS // interval_ms)

    def pick() -> tuple[int, int]:
        k, d = spots[rng.integers(len(spots))]
        return int(k), int(d)

    for _ in range(FAULTS):
        k, d = pick()
        fault[k: k + int(rng.uniform(10, 30)) * per_minute, d] = True
    for _ in range(NOTICES):
        k, d = pick()
        notice[k: k + int(rng.uniform(30, 90)) * per_minute, d] = True
    for _ in range(CORRECTED):
        k, d = pick()
        ecc[k:, d] += rng.integers(1, 5)
    for _ in range(LINK_BURSTS):
        k, d = pick()
        link[k:, d] += rng.integers(5, 40)
    began = fault & ~np.vstack([np.zeros((1, devices), dtype=bool), fault[:-1]])
    return Minor(fault, np.cumsum(began, axis=0).astype(float), notice, ecc, link)
