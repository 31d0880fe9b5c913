"""Exporter dialect writers, one module per vendor or engine, looked up by the profile name they speak."""

from __future__ import annotations

from app.demo.dialects import amd, ascend, cambricon, dcgm, gaudi, sglang, vllm
from app.demo.dialects.base import DeviceDialect, EngineDialect, EngineSlice, NodeSlice
from app.demo.exceptions import DemoError

DEVICES: dict[str, DeviceDialect] = {d.profile: d for d in (
    dcgm.DIALECT, amd.DIALECT, ascend.DIALECT, gaudi.DIALECT, cambricon.DIALECT)}
ENGINES: dict[str, EngineDialect] = {d.profile: d for d in (vllm.DIALECT, sglang.DIALECT)}


def device_dialect(exporter: str) -> DeviceDialect:
    """The writer of an accelerator exporter, or an error naming the known ones."""
    try:
        return DEVICES[exporter]
    except KeyError:
        raise DemoError(f"no demo writer for exporter '{exporter}'; known: {', '.join(sorted(DEVICES))}") from None


def engine_dialect(engine: str) -> EngineDialect:
    """The writer of a serving engine, or an error naming the known ones."""
    try:
        return ENGINES[engine]
    except KeyError:
        raise DemoError(f"no demo writer for engine '{engine}'; known: {', '.join(sorted(ENGINES))}") from None


__all__ = ["DEVICES", "ENGINES", "EngineSlice", "NodeSlice", "device_dialect", "engine_dialect"]
