"""What a dialect writer gets: one node's devices (or one serving engine) over a slice of time."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from app.demo.story import PoolLayout, Signals


@dataclass(frozen=True)
class NodeSlice:
    """The devices of one node over consecutive scrapes; signals are already cut to them (steps x devices)."""

    lay: PoolLayout
    node: str
    node_index: int
    ts_ms: np.ndarray
    sig: Signals
    driver: str
    upgraded: bool = False   # the exporter runs its newer build (story.UPGRADE)

    def masked(self, values: np.ndarray) -> np.ndarray:
        """The values with NaN where the device was not scraped."""
        return np.where(self.sig.present, values, np.nan)

    def uid(self, device: int, width: int = 32) -> str:
        """A stable hexadecimal id of a device (UUIDs, serial numbers, die ids)."""
        return hashlib.sha256(f"{self.node}/{device}".encode()).hexdigest()[:width]


@dataclass(frozen=True)
class EngineSlice:
    """One serving engine (a replica of a pool) over consecutive scrapes; cumulative counters and gauges."""

    lay: PoolLayout
    node: str
    engine: int
    model: str
    ts_ms: np.ndarray
    running: np.ndarray
    waiting: np.ndarray
    kv_usage: np.ndarray
    prompt_tokens: np.ndarray
    generation_tokens: np.ndarray
    finished: dict[str, np.ndarray]                 # finished_reason -> cumulative count
    ttft: tuple[np.ndarray, np.ndarray, np.ndarray]  # cumulative buckets (steps x bounds), sum, count
    e2e: tuple[np.ndarray, np.ndarray, np.ndarray]


class DeviceDialect(Protocol):
    """An accelerator exporter's /metrics output for one node."""

    profile: str

    def render(self, ns: NodeSlice) -> str:
        """Exposition text of the node's devices over the slice."""
        ...


class EngineDialect(Protocol):
    """A serving engine's /metrics output."""

    profile: str
    ttft_bounds: tuple[float, ...]
    e2e_bounds: tuple[float, ...]

    def render(self, es: EngineSlice) -> str:
        """Exposition text of the engine over the slice."""
        ...


def le_text(bound: float) -> str:
    """A bucket bound as prometheus_client writes it (1.0, 0.25, +Inf)."""
    return "+Inf" if np.isinf(bound) else repr(float(bound))
