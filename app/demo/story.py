"""The demo's fleet and what happens to it: who serves, who overheats, who fails, whose driver drifted.

Everything is drawn from one seeded numpy Generator handed in by the caller, so the same spec and seed give
the same fleet, story and signals. Signals are in canonical units (ratio, bytes, W, °C, Hz); the dialect
writers convert them to each vendor's units.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from app.demo.incidents import minor_incidents
from canonical.timeunits import DAY_MS, HOUR_MS, MINUTE_MS
from pool_registry import ONBOARDING_STAGES, Chip, Model, Pool, Registry, Serving

FATAL_POOL = "h100-a"        # one of its nodes loses a GPU off the bus again and again (XID 79)
THROTTLE_POOL = "ascend-a"   # runs hot under afternoon load and drops its AI-core clock
STRAGGLER_POOL = "mi300x-a"  # one device is stuck on a low clock (a power cap left behind)
DRIFT = (("mi300x-a", -1, "driver", "6.12.12"), ("gaudi3-a", 0, "driver", "1.22.2"))  # (pool, node index, ...)
DRIFT_AT = 0.4               # share of the window after which the drifted drivers are seen
UPGRADE = ("ascend-a", -1)  # (pool, node index) whose exporter is upgraded, to a build that drops a metric
UPGRADE_AT = 0.6            # share of the window after which the upgraded exporter runs
# the canary's image ships a newer serving engine than the model it serves pins (declared in its stack)
ENGINE_AHEAD = ("gaudi3-a", "vllm", "0.16.0")
ONBOARDING_FROM = 0.35       # share of the window after which an onboarding pool's exporter is deployed

# Chip facts the registry does not hold: board power limit (W) and top compute clock (MHz).
TDP_W = {"h100-sxm": 700.0, "mi300x": 750.0, "ascend-910b": 400.0, "gaudi3": 900.0, "mlu370-x8": 250.0}
CLOCK_MHZ = {"h100-sxm": 1980.0, "mi300x": 2100.0, "ascend-910b": 1800.0, "gaudi3": 1600.0, "mlu370-x8": 1300.0}
# the vision-language pool's small model takes many short requests: a low level keeps its share of the demo's rows
LOAD_LEVEL = {"h100-a": 1.0, "mi300x-a": 0.9, "ascend-a": 1.08, "gaudi3-a": 0.7, "h100-vl": 0.25}
CANARY_POOL = "gaudi3-a"     # takes a share of traffic that grows over the window
# What the serving engines really do, which the registry's cost model only estimates: (mfu, mem_bw_eff,
# step overhead in ms). The observed requests come from the replay's model at these values, so
# `hetpool replay calibrate` on the demo should find them again.
# h100-vl runs h100-a's chip and engine, so it runs at h100-a's coefficients (calibration fits them together).
PLANTED = {"h100-a": (0.41, 0.69, 3.0), "mi300x-a": (0.31, 0.58, 5.0), "ascend-a": (0.34, 0.53, 6.0),
           "gaudi3-a": (0.36, 0.64, 4.0), "h100-vl": (0.41, 0.69, 3.0)}


@dataclass(frozen=True)
class PoolLayout:
    """One pool of the scaled demo fleet: its nodes, and which of them report."""

    pool: Pool
    chip: Chip
    nodes: tuple[str, ...]
    reporting_nodes: tuple[str, ...]
    serving: bool            # runs a serving engine (onboarding stage framework or later)
    takes_traffic: bool      # receives requests (canary or later)
    model: Model | None

    @property
    def devices_per_node(self) -> int:
        """Devices on each node."""
        return self.pool.devices_per_node


def replica_width(chip: Chip, model: Model, serving: Serving, devices_per_pool: int) -> int:
    """Devices per replica in the demo: the registry's width capped at the pool size, or, when that cannot hold
    the model's weights with room for one full step of KV cache (max_num_batched_tokens tokens), the narrowest
    power of two that can (never wider than the registry's width)."""
    def holds(width: int) -> bool:
        usable = chip.hbm_capacity_gb * 1e9 * width * serving.gpu_memory_utilization
        return usable - model.resident_bytes >= model.kv_bytes_per_token * serving.max_num_batched_tokens

    width = min(serving.devices_per_replica, devices_per_pool)
    while not holds(width) and width < serving.devices_per_replica:
        width *= 2
    return min(width, serving.devices_per_replica)


def scale_registry(reg: Registry, devices_per_pool: int) -> Registry:
    """The registry with every pool resized to `devices_per_pool` devices on at least two nodes where possible.

    Replicas keep their width (capped at the pool size) unless that could not hold the model
    (replica_width); a pool too small for one such replica gets just one, on as many nodes as the other
    pools. Pools keep their price per device, so the demo's costs and capacities stay proportional to the
    declared fleet. The canary pool declares the newer engine its image ships (ENGINE_AHEAD).
    """
    pools = []
    for p in reg.pools:
        dpn = max(1, min(p.devices_per_node, devices_per_pool // 4 or 1))
        devices = devices_per_pool
        serving = p.serving
        if serving is not None:
            width = replica_width(reg.chip(p.chip), reg.model(serving.model), serving, devices_per_pool)
            if width > devices:
                dpn, devices = width // max(1, devices // dpn), width
            serving = dataclasses.replace(serving, devices_per_replica=width, replicas=max(1, devices // width))
        stack = {**p.stack, ENGINE_AHEAD[1]: ENGINE_AHEAD[2]} if p.id == ENGINE_AHEAD[0] else p.stack
        pools.append(dataclasses.replace(p, devices=devices, devices_per_node=dpn, serving=serving, stack=stack))
    return dataclasses.replace(reg, pools=tuple(pools))


def layout(reg: Registry) -> list[PoolLayout]:
    """Node names follow each pool's node pattern (`h100-a-*` -> h100-a-01, ...)."""
    framework = ONBOARDING_STAGES.index("framework")
    canary = ONBOARDING_STAGES.index("canary")
    out = []
    for p in reg.pools:
        prefix = p.assign.node_patterns[0].rstrip("*") if p.assign.node_patterns else f"{p.id}-"
        nodes = tuple(f"{prefix}{i + 1:02d}" for i in range(p.nodes))
        onboarding = p.onboarding.stage_index < framework
        reporting = nodes[: max(1, len(nodes) // 2)] if onboarding else nodes
        out.append(PoolLayout(p, reg.chip_of(p), nodes, reporting, serving=p.serving is not None and not onboarding,
                              takes_traffic=p.serving is not None and p.onboarding.stage_index >= canary,
                              model=reg.model(p.serving.model) if p.serving else None))
    return out


def fleet_load(ts_ms: np.ndarray) -> np.ndarray:
    """Share of peak demand: lowest at 03:00 UTC, highest at 15:00, weekends 15 % quieter."""
    hour = (ts_ms % DAY_MS) / HOUR_MS
    weekday = (ts_ms // DAY_MS + 3) % 7  # 1970-01-01 was a Thursday; 0 = Monday
    daily = 0.5 - 0.5 * np.cos(2 * np.pi * (hour - 3) / 24)
    return 0.22 + 0.68 * daily * np.where(weekday >= 5, 0.85, 1.0)


def smooth_noise(rng: np.random.Generator, steps: int, width: int, every: int, sigma: float) -> np.ndarray:
    """Gaussian noise with knots every `every` steps, linearly interpolated: shape (steps, width)."""
    knots = rng.normal(0.0, sigma, size=(steps // every + 2, width))
    pos = np.arange(steps) / every
    i = pos.astype(np.int64)
    frac = (pos - i)[:, None]
    return knots[i] * (1 - frac) + knots[i + 1] * frac


@dataclass(frozen=True)
class Episode:
    """A GPU falling off the bus: XID 79 from `start` for `fault` steps, then a node reboot (or no return)."""

    start: int
    fault: int
    reboot: int
    final: bool


def fatal_episodes(steps: int, interval_ms: int, rng: np.random.Generator) -> list[Episode]:
    """Recurring XID 79 episodes: from 3 h in, every 9 to 14 h; the last one, 2.5 h before the end, stays down."""
    per_hour = HOUR_MS // interval_ms
    fault, reboot = max(1, 10 * MINUTE_MS // interval_ms), max(1, 6 * MINUTE_MS // interval_ms)
    final = steps - int(2.5 * per_hour)
    out = []
    at = 3 * per_hour
    while at < final - 4 * per_hour:
        out.append(Episode(at, fault, reboot, final=False))
        at += int(rng.uniform(9, 14) * per_hour)
    out.append(Episode(max(final, 0), fault, reboot, final=True))
    return out


@dataclass
class Signals:
    """A pool's devices over the whole window, shape (steps, devices), in canonical units."""

    present: np.ndarray      # bool: the device was scraped at that step
    util: np.ndarray
    mem_used: np.ndarray     # bytes
    mem_total: np.ndarray
    power: np.ndarray        # W
    temp: np.ndarray         # °C
    clock: np.ndarray        # Hz
    health: np.ndarray       # 1 healthy, 0 not
    energy: np.ndarray       # J since the exporter started
    xid: np.ndarray          # last fatal code (sticky; 0 = none)
    ecc_uncorrectable: np.ndarray  # cumulative count
    clock_ratio: np.ndarray  # pool-level clock / top clock per step (for the serving latencies)
    outage: np.ndarray       # (steps,) bool: a replica of this pool is failing requests
    fault: np.ndarray        # bool: a recoverable fault is reported (sticky)
    fault_count: np.ndarray  # cumulative count of faults begun
    notice: np.ndarray       # bool: an informational code is reported (sticky)
    ecc_corrected: np.ndarray  # cumulative count
    link_errors: np.ndarray  # cumulative count of interconnect replays


def target_busy(pool_id: str, ts_ms: np.ndarray, progress: np.ndarray) -> np.ndarray:
    """The share of time a pool's replicas are meant to be busy: the fleet's diurnal load at the pool's level,
    a canary pool ramping up over the window."""
    level = LOAD_LEVEL.get(pool_id, 0.8) * (0.5 + 0.5 * progress if pool_id == CANARY_POOL else 1.0)
    return np.clip(fleet_load(ts_ms) * level, 0.0, 0.95)


def device_signals(lay: PoolLayout, ts_ms: np.ndarray, interval_ms: int, rng: np.random.Generator,
                   busy: np.ndarray | None = None) -> Signals:
    """Every device signal of one pool: its load, the pool's quirks, and the fatal node's episodes.

    `busy` (steps x devices) is the share of each scrape interval the device's replica was busy, as the
    serving model computed it; a device's utilization is that, as an exporter's kernel-activity counter would
    report it. Without it (before the traffic is served, or for a pool that serves none) the load follows the
    fleet's diurnal curve.
    """
    steps, devices = len(ts_ms), lay.pool.devices
    load = fleet_load(ts_ms)[:, None]
    dev_factor = rng.uniform(0.92, 1.05, size=devices)[None, :]
    noise = smooth_noise(rng, steps, devices, max(1, 10 * MINUTE_MS // interval_ms), 0.05)
    if busy is not None:
        util = busy + rng.normal(0, 0.005, (steps, devices))
    elif lay.serving:
        util = load * LOAD_LEVEL.get(lay.pool.id, 0.8) * dev_factor + noise + rng.normal(0, 0.015, (steps, devices))
    else:  # burn-in: benchmark runs switched on and off every half hour
        on = (ts_ms // (30 * MINUTE_MS)) % 3 == 0
        util = np.where(on[:, None], 0.85, 0.03) + noise * 0.3
    util = np.clip(util, 0.0, 1.0)
    total = lay.chip.hbm_capacity_gb * 1024**3 * np.ones((steps, devices))
    mem_frac = 0.86 + 0.05 * util if lay.serving else 0.02 + 0.5 * util
    tdp, top = TDP_W[lay.chip.id], CLOCK_MHZ[lay.chip.id] * 1e6
    power_frac = 0.13 + 0.87 * util**0.9
    hot = lay.pool.id == THROTTLE_POOL
    temp = (32 + (66 if hot else 40) * _thermal_lag(power_frac, interval_ms)
            + smooth_noise(rng, steps, devices, 20, 1.2) + rng.normal(0, 0.4, (steps, devices)))
    ratio = 1.0 - 0.3 * np.clip((temp - 86.0) / 6.0, 0.0, 1.0) if hot else np.ones((steps, devices))
    if lay.pool.id == STRAGGLER_POOL:
        ratio[:, 0] = 0.72
    # a serving engine holds its clocks up between requests; burn-in devices drop theirs when idle
    clock = top * ratio * (1.0 if lay.serving else np.where(util < 0.05, 0.6, 1.0))
    power = tdp * power_frac * ratio**1.5 + rng.normal(0, 0.01 * tdp, (steps, devices))
    present = np.ones((steps, devices), dtype=bool)
    health = np.ones((steps, devices))
    xid = np.zeros((steps, devices))
    ecc = np.zeros((steps, devices))
    outage = np.zeros(steps, dtype=bool)
    if not lay.serving and len(lay.reporting_nodes) < len(lay.nodes):
        present[:, len(lay.reporting_nodes) * lay.devices_per_node:] = False
        present[: int(steps * ONBOARDING_FROM), :] = False
    if lay.pool.id == FATAL_POOL:
        _fatal_node(lay, interval_ms, rng, util, power, health, xid, ecc, present, outage)
    energy = rng.uniform(1e8, 5e8, size=devices)[None, :] + np.cumsum(power * interval_ms / 1000, axis=0)
    # drawn from a child generator, so the rest of the story and the traffic stay as they were
    minor = minor_incidents(rng.spawn(1)[0], present, interval_ms)
    return Signals(present, util, total * mem_frac, total, power, temp, clock, health, energy, xid, ecc,
                   clock_ratio=ratio.mean(axis=1), outage=outage, fault=minor.fault, fault_count=minor.fault_count,
                   notice=minor.notice, ecc_corrected=minor.ecc_corrected, link_errors=minor.link_errors)


def _thermal_lag(power_frac: np.ndarray, interval_ms: int, tau_ms: float = 5 * MINUTE_MS) -> np.ndarray:
    """Power share as the die's temperature follows it: an exponential moving average over a few minutes."""
    alpha = 1.0 - np.exp(-interval_ms / tau_ms)
    out = np.empty_like(power_frac)
    level = power_frac[0]
    for k in range(power_frac.shape[0]):
        level = level + alpha * (power_frac[k] - level)
        out[k] = level
    return out


def fatal_node_index(lay: PoolLayout) -> int:
    """The failing node: the second node of the pool (the first when there is only one)."""
    return min(1, len(lay.nodes) - 1)


def _fatal_node(lay: PoolLayout, interval_ms: int, rng: np.random.Generator, util: np.ndarray, power: np.ndarray,
                health: np.ndarray, xid: np.ndarray, ecc: np.ndarray, present: np.ndarray,
                outage: np.ndarray) -> None:
    """XID 79 episodes on the node's last GPU, a double-bit ECC error (XID 48) on its first, reboots between."""
    steps = util.shape[0]
    dpn = lay.devices_per_node
    first = fatal_node_index(lay) * dpn
    bad = first + dpn - 1
    episodes = fatal_episodes(steps, interval_ms, rng)
    reboots = []
    for ep in episodes:
        fault_end = min(steps, ep.start + ep.fault)
        xid[ep.start:fault_end, bad] = 79
        health[ep.start:fault_end, bad] = 0
        util[ep.start:fault_end, bad] = 0.0
        power[ep.start:fault_end, bad] = 60.0
        outage[ep.start:fault_end + ep.reboot] = True
        if ep.final:
            present[fault_end:, bad] = False
            outage[fault_end:] = True
        else:
            back = min(steps, fault_end + ep.reboot)
            present[fault_end:back, first:first + dpn] = False
            reboots.append(back)
    # a double-bit ECC error between the first two episodes; sticky until the node's next reboot
    dbe_at = (reboots[0] + episodes[1].start) // 2 if len(episodes) > 1 and reboots else steps // 2
    until = next((b for b in reboots if b > dbe_at), steps)
    if first == bad:  # one GPU per node: its next XID 79 replaces the sticky 48
        until = min(until, next((ep.start for ep in episodes if ep.start > dbe_at), steps))
    xid[dbe_at:until, first] = 48
    ecc[dbe_at:until, first] = 1  # a volatile count: the reboot clears it
    health[dbe_at:until, first] = 0


def drift_step(steps: int) -> int:
    """The scrape from which the drifted nodes report their new driver."""
    return int(steps * DRIFT_AT)


def exporter_upgraded(lay: PoolLayout, node_index: int, step: int, steps: int) -> bool:
    """Whether the node's exporter runs its upgraded build at this scrape."""
    pool, index = UPGRADE
    return lay.pool.id == pool and node_index == index % len(lay.nodes) and step >= upgrade_step(steps)


def upgrade_step(steps: int) -> int:
    """The scrape from which the upgraded exporter runs."""
    return int(steps * UPGRADE_AT)


def drifted_driver(lay: PoolLayout, node_index: int, step: int, steps: int) -> str:
    """The driver a node reports at a scrape: the declared one, or its drifted one from drift_step on."""
    for pool, index, component, version in DRIFT:
        if (pool == lay.pool.id and component == "driver" and node_index == index % len(lay.nodes)
                and step >= drift_step(steps)):
            return version
    return lay.pool.stack.get("driver", "")
