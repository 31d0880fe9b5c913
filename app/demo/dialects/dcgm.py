"""NVIDIA dcgm-exporter: default counters plus health and volatile ECC; labels in the exporter's template order."""

from __future__ import annotations

import numpy as np

from app.demo.dialects.base import NodeSlice
from app.demo.expo import Family, family, labels_text, render

MIB = 1024**2
RESERVED_MIB = 462.0
MODEL_NAME = {"h100-sxm": "NVIDIA H100 80GB HBM3"}
XID_FAULT = 13    # graphics engine exception: the application restarts
XID_NOTICE = 63   # a row remap recorded


class Dcgm:
    """dcgm-exporter 4.x (lowercase hostname label, driver version as a label on every GPU metric)."""

    profile = "dcgm"

    def render(self, ns: NodeSlice) -> str:
        """Exposition text of the node's GPUs over the slice."""
        model = MODEL_NAME.get(ns.lay.chip.id, ns.lay.chip.name)
        n = ns.sig.util.shape[1]
        series = [labels_text([
            ("gpu", str(i)), ("UUID", f"GPU-{ns.uid(i, 8)}-{ns.uid(i)[8:12]}-{ns.uid(i)[12:16]}-"
                                      f"{ns.uid(i)[16:20]}-{ns.uid(i)[20:32]}"),
            ("pci_bus_id", f"00000000:{0x18 + 0x11 * i:02X}:00.0"), ("device", f"nvidia{i}"),
            ("modelName", model), ("hostname", ns.node), ("DCGM_FI_DRIVER_VERSION", ns.driver),
        ]) for i in range(n)]
        s = ns.sig
        total_mib = s.mem_total / MIB - RESERVED_MIB
        used_mib = np.minimum(np.round(s.mem_used / MIB), total_mib)

        def fam(name: str, help_: str, type_: str, values: np.ndarray, decimals: int = 0) -> Family:
            masked = ns.masked(values)
            return family(name, help_, type_, {f"{name}{lab}": masked[:, i] for i, lab in enumerate(series)},
                          decimals)

        return render([
            fam("DCGM_FI_DEV_SM_CLOCK", "SM clock frequency (in MHz).", "gauge", s.clock / 1e6),
            fam("DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C).", "gauge", s.temp),
            fam("DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).", "gauge", s.power, 3),
            fam("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "Total energy consumption since boot (in mJ).", "counter",
                s.energy * 1000),
            fam("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", "gauge", s.util * 100),
            fam("DCGM_FI_DEV_XID_ERRORS", "Value of the last XID error encountered.", "gauge",
                np.where(s.xid > 0, s.xid, np.where(s.fault, XID_FAULT, np.where(s.notice, XID_NOTICE, 0)))),
            fam("DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB).", "gauge", total_mib - used_mib),
            fam("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).", "gauge", used_mib),
            fam("DCGM_FI_DEV_FB_RESERVED", "Framebuffer memory reserved (in MiB).", "gauge",
                np.full_like(used_mib, RESERVED_MIB)),
            fam("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "Total number of double-bit volatile ECC errors.", "counter",
                s.ecc_uncorrectable),
            fam("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "Total number of single-bit volatile ECC errors.", "counter",
                s.ecc_corrected),
            fam("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "Total number of PCIe retries.", "counter", s.link_errors),
            fam("DCGM_EXP_GPU_HEALTH_STATUS", "DCGM reported health status", "gauge", s.health),
        ], ns.ts_ms)


DIALECT = Dcgm()
