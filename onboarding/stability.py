"""Long-run stability from stored telemetry: sustained hours since the last fatal error, and no memory growth.

Sustained operation runs from the end of the hour of the pool's last fatal error event (or from its first
sample) to its newest sample. The memory trend test is a least-squares line through each device's hourly mean
of accelerator.memory.used over that span: its growth is the line's rise across the span divided by the
device's mean use. A device whose memory grows by more than `max_memory_growth` (5 % by default) leaks; three
hourly points are needed before a line is fitted at all.
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass

import numpy as np
import polars as pl

from canonical.timeunits import HOUR_MS
from onboarding.gates import FAIL, PASS, PENDING, Outcome

MIN_POINTS = 3


@dataclass(frozen=True)
class Telemetry:
    """What the store holds about a pool: its sample span, fatal events and hourly memory per device."""

    first_ms: int | None
    last_ms: int | None
    fatal: pl.DataFrame   # bucket, node, device, error_class, code, events (1-hour buckets holding fatal events)
    memory: pl.DataFrame  # bucket, node, device, used (hourly mean bytes)


def growth(memory: pl.DataFrame, start_ms: int) -> pl.DataFrame:
    """Per device from start_ms on: hourly points, fitted rise over the span / mean use (see the module doc)."""
    rows = []
    span = memory.filter(pl.col("bucket") >= start_ms)
    for (node, device), part in span.group_by(["node", "device"], maintain_order=True):
        part = part.sort("bucket")
        if part.height < MIN_POINTS:
            continue
        hours = (part["bucket"].to_numpy() - part["bucket"][0]) / HOUR_MS
        used = part["used"].to_numpy()
        slope = float(np.polyfit(hours, used, 1)[0])
        mean = float(np.mean(used))
        rows.append({"node": node, "device": device, "points": part.height,
                     "growth": slope * float(hours[-1]) / mean if mean > 0 else 0.0})
    return pl.DataFrame(rows, schema={"node": pl.String, "device": pl.String, "points": pl.Int64,
                                      "growth": pl.Float64})


def sustained_start(t: Telemetry) -> int | None:
    """Where sustained operation begins: the end of the hour of the last fatal error, else the first sample."""
    if t.first_ms is None:
        return None
    if not t.fatal.height:
        return t.first_ms
    return max(t.first_ms, int(t.fatal.sort("bucket")["bucket"][-1]) + HOUR_MS)


def stability(t: Telemetry, hours: float, max_memory_growth: float) -> Outcome:
    """Pass after `hours` of sustained operation without memory growth; fail on growth or a fatal error cutting
    the run short; pending while the pool simply has not run that long yet."""
    if t.first_ms is None or t.last_ms is None:
        return Outcome(PENDING, "no telemetry stored for the pool yet")
    start, cut = sustained_start(t), ""
    assert start is not None  # the pool has a first sample
    if t.fatal.height:
        last = t.fatal.sort("bucket").row(-1, named=True)
        where = f"{last['node']}/{last['device']}" if last["device"] else last["node"]
        cut = (f"last fatal error {last['error_class']} (code {last['code'] or '?'}) on {where} in the hour from "
               f"{_when(int(last['bucket']))}; ")
    sustained = max(0.0, (t.last_ms - start) / HOUR_MS)
    leaks = growth(t.memory, start).filter(pl.col("growth") > max_memory_growth)
    if leaks.height:
        worst = leaks.sort("growth", descending=True).row(0, named=True)
        return Outcome(FAIL, f"{cut}memory grows {worst['growth']:.1%} over {math.floor(sustained * 10) / 10:.1f} h on "
                             f"{worst['node']}/{worst['device']} (bound {max_memory_growth:.0%}); "
                             f"{leaks.height} device(s) trend upward")
    # rounded down, so 23.96 h never reads as the 24.0 h that would pass
    text = f"{cut}{math.floor(sustained * 10) / 10:.1f} h of sustained operation of {hours:g} h needed; no memory " \
           "growth trend"
    if sustained >= hours:
        return Outcome(PASS, text, at_ms=int(start + hours * HOUR_MS))
    return Outcome(FAIL if cut else PENDING, text)


def _when(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
