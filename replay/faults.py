"""Failures and throttling of the replayed fleet, from the telemetry the console shows or from the candidate.

Per pool, from the store over the candidate's window (by default the 7 days before the replayed traffic):

    failures per device-hour = (fatal error events + devices that stopped reporting) / reported device-hours

with reported device-hours those of the devices that reported, in the hours the reliability index counts
(store.views.reliability; the index also charges the devices that never reported, which cannot fail here). A
replica fails when any of its devices does, so its failures arrive as a Poisson process at devices_per_replica x
that rate; a failed replica is down for the repair time, then serves again. Its running and queued requests are lost and
retried by the router at the moment of failure: the retry starts the request again (its KV cache and the
tokens it had streamed are gone), and its busy cost so far stays spent.

Throttling: a pool whose devices ran below their reference clock for a share s of their busy minutes, at a
mean clock ratio r in those minutes, runs its replicas at the time-averaged speed 1 - s + s r, so every pass
takes 1 / (1 - s + s r) as long. The clock sets the rate of compute and of the engine's own work; taking
memory-bound passes as slowed by the same factor is the conservative choice (devices throttle power and
clock together, and HBM traffic is issued by the same cores).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import polars as pl

from replay.candidate import FaultSpec, PoolFaults

SECONDS_PER_HOUR = 3600.0

TELEMETRY_SCHEMA = {"pool": pl.String, "hours": pl.Int64, "device_hours": pl.Float64, "fatal_events": pl.Float64,
                    "devices_lost": pl.Int64, "busy_minutes": pl.Int64, "throttled_minutes": pl.Int64,
                    "throttled_clock": pl.Float64}


@dataclass(frozen=True)
class PoolFaultModel:
    """One pool's resolved figures, and where they came from."""

    failures_per_device_hour: float
    repair_s: float
    throttled_share: float
    throttled_clock: float
    source: str  # "telemetry", "candidate" or "none"

    @property
    def speed(self) -> float:
        """Time-averaged speed of its replicas: 1 - s + s r (1 when never throttled)."""
        return 1.0 - self.throttled_share + self.throttled_share * self.throttled_clock

    def replica_rate(self, devices_per_replica: int) -> float:
        """Failures per second of one replica of that many devices."""
        return self.failures_per_device_hour * devices_per_replica / SECONDS_PER_HOUR

    def risk(self, devices_per_replica: int, seconds: float) -> float:
        """Probability that a replica fails within `seconds`: 1 - exp(-rate x seconds)."""
        return -math.expm1(-self.replica_rate(devices_per_replica) * seconds)


NONE = PoolFaultModel(0.0, 900.0, 0.0, 1.0, "none")


def resolve(spec: FaultSpec, pools: list[str], telemetry: pl.DataFrame | None) -> dict[str, PoolFaultModel]:
    """Each pool's figures: the candidate's where it gives them, else the telemetry's, else none."""
    if spec.mode == "off":
        return {p: NONE for p in pools}
    measured = from_telemetry(telemetry, spec.repair_s) if telemetry is not None else {}
    out = {}
    for p in pools:
        given: PoolFaults | None = spec.pools.get(p)
        if given is not None:
            out[p] = PoolFaultModel(given.failures_per_device_hour,
                                    given.repair_s if given.repair_s is not None else spec.repair_s,
                                    given.throttled_share, given.throttled_clock, "candidate")
        else:
            out[p] = measured.get(p, PoolFaultModel(0.0, spec.repair_s, 0.0, 1.0, "none"))
    return out


def from_telemetry(frame: pl.DataFrame, repair_s: float) -> dict[str, PoolFaultModel]:
    """Per pool figures from the store's fault telemetry (TELEMETRY_SCHEMA rows)."""
    out = {}
    for row in frame.iter_rows(named=True):
        hours = float(row["device_hours"] or 0.0)
        events = float(row["fatal_events"] or 0.0) + int(row["devices_lost"] or 0)
        rate = events / hours if hours > 0 else 0.0
        busy = int(row["busy_minutes"] or 0)
        share = int(row["throttled_minutes"] or 0) / busy if busy > 0 else 0.0
        clock = row["throttled_clock"]
        clock = float(clock) if clock is not None and share > 0 else 1.0
        out[str(row["pool"])] = PoolFaultModel(rate, repair_s, min(share, 1.0), min(max(clock, 0.05), 1.0),
                                               "telemetry")
    return out


def next_failure(rng: np.random.Generator, rate: float, after: float) -> float:
    """The next failure time of a Poisson process of `rate` per second, after `after` (inf when rate is 0)."""
    return after + float(rng.exponential(1.0 / rate)) if rate > 0 else math.inf
