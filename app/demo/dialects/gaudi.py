"""Intel Gaudi metric exporter: habanalabs_* gauges, power in mW, versions (driver, fit, spi) as labels."""

from __future__ import annotations

import numpy as np

from app.demo.dialects.base import NodeSlice
from app.demo.expo import Family, family, labels_text, render


class Gaudi:
    """The habanalabs exporter's label set: Serial, UUID, device, id, fit, spi, driver, pod labels."""

    profile = "gaudi"

    def render(self, ns: NodeSlice) -> str:
        """Exposition text of the node's accelerators over the slice."""
        n = ns.sig.util.shape[1]
        firmware = ns.lay.pool.stack.get("firmware", "")
        series = []
        for i in range(n):
            serial = "AN" + ns.uid(i, 10).upper()
            series.append(labels_text([
                ("Serial", serial), ("UUID", ns.uid(i)), ("device", serial), ("id", str(i)),
                ("fit", firmware), ("spi", firmware), ("driver", ns.driver), ("pod_namespace", ""), ("pod_name", ""),
            ]))
        s = ns.sig

        def fam(name: str, help_: str, values: np.ndarray) -> Family:
            masked = ns.masked(values)
            return family(name, help_, "gauge", {f"{name}{lab}": masked[:, i] for i, lab in enumerate(series)})

        return render([
            fam("habanalabs_clock_soc_mhz", "Current frequency of the SOC", s.clock / 1e6),
            fam("habanalabs_memory_total_bytes", "Current total bytes of memory", s.mem_total),
            fam("habanalabs_memory_used_bytes", "Current used bytes of memory", s.mem_used),
            fam("habanalabs_pending_rows_with_double_bit_ecc_errors", "Counter for rows with Double-Bit ECC errors",
                s.ecc_uncorrectable + s.fault_count),
            fam("habanalabs_pending_rows_with_single_bit_ecc_errors", "Counter for rows with Single-Bit ECC errors",
                s.ecc_corrected),
            fam("habanalabs_pcie_replay_count", "PCIe replay count", s.link_errors),
            fam("habanalabs_power_mW", "Power usage in milli-watts", s.power * 1000),
            fam("habanalabs_temperature_onchip", "Chip temperature in celsius", s.temp),
            fam("habanalabs_utilization", "Utilization of the device", s.util * 100),
        ], ns.ts_ms)


DIALECT = Gaudi()
