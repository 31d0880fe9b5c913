"""Huawei Ascend npu-exporter: every sample carries its own ms timestamp; no node label (the target names it)."""

from __future__ import annotations

import numpy as np

from app.demo.dialects.base import NodeSlice
from app.demo.expo import Family, family, labels_text, render

MIB = 1024**2
MODEL_NAME = {"ascend-910b": "910B3"}
# DCMI fault codes, written as the decimal of their hex: a restart request and a sub-health notice
CODE_FAULT, CODE_NOTICE = int("80C98008", 16), int("81A3880C", 16)
# the exporter's builds: the newer one no longer reports the chip's power (an upgrade that drops a metric)
BUILDS = ("v6.0.0", "v6.0.1")


class Ascend:
    """npu-exporter v6 label set (id, model_name, vdie_id, pcie_bus_info, k8s labels left empty)."""

    profile = "ascend"

    def render(self, ns: NodeSlice) -> str:
        """Exposition text of the node's NPUs over the slice."""
        n = ns.sig.util.shape[1]
        model = MODEL_NAME.get(ns.lay.chip.id, ns.lay.chip.id)
        series = []
        for i in range(n):
            h = ns.uid(i).upper()
            series.append(labels_text([
                ("container_name", ""), ("id", str(i)), ("model_name", model), ("namespace", ""),
                ("pcie_bus_info", f"0000:{0xC1 + i:02X}:00.0"), ("pod_name", ""),
                ("vdie_id", f"{h[:8]}-{h[8:16]}-{h[16:24]}-{h[24:32]}"),
            ]))
        s = ns.sig

        def fam(name: str, help_: str, values: np.ndarray, decimals: int = 0) -> Family:
            masked = ns.masked(values)
            return family(name, help_, "gauge", {f"{name}{lab}": masked[:, i] for i, lab in enumerate(series)},
                          decimals)

        return render([
            fam("npu_chip_info_aicore_current_freq", "the npu ai core current frequency, unit is 'MHz'", s.clock / 1e6),
            fam("npu_chip_info_error_code", "the npu error code", np.where(s.fault, CODE_FAULT, 0)),
            fam("npu_chip_info_error_code_1", "the npu error code", np.where(s.notice, CODE_NOTICE, 0)),
            fam("npu_chip_info_hbm_ecc_single_bit_error_cnt", "the npu hbm single bit error count", s.ecc_corrected),
            fam("npu_chip_info_health_status", "the npu health status", s.health),
            fam("npu_chip_info_hbm_total_memory", "the npu hbm total memory, unit is 'MB'",
                np.round(s.mem_total / MIB)),
            fam("npu_chip_info_hbm_used_memory", "the npu hbm used memory, unit is 'MB'", np.round(s.mem_used / MIB)),
            *([] if ns.upgraded else [fam("npu_chip_info_power", "the npu power, unit is 'W'", s.power, 1)]),
            fam("npu_chip_info_temperature", "the npu temperature, unit is 'C'", s.temp),
            fam("npu_chip_info_utilization", "the ai core utilization, unit is '%'", s.util * 100),
            family("npu_exporter_version_info", "exporter version with value '1'", "gauge", {
                f"npu_exporter_version_info{labels_text([('exporterVersion', BUILDS[ns.upgraded])])}":
                np.where(s.present.any(axis=1), 1.0, np.nan)}),
        ], ns.ts_ms)


DIALECT = Ascend()
