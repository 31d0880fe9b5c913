"""Cambricon mlu-exporter (metrics prefix mlu): memory in bytes, common labels driver, mcu, mlu, node, ..."""

from __future__ import annotations

import numpy as np

from app.demo.dialects.base import NodeSlice
from app.demo.expo import Family, family, labels_text, render

MODEL = {"mlu370-x8": "MLU370-X8"}
XID_FAULT = "8"  # the XID whose counter a recoverable fault raises


class Cambricon:
    """mlu-exporter with its common label set; the node label names the host."""

    profile = "cambricon"

    def render(self, ns: NodeSlice) -> str:
        """Exposition text of the node's MLUs over the slice."""
        n = ns.sig.util.shape[1]
        model = MODEL.get(ns.lay.chip.id, ns.lay.chip.id)
        label_pairs = [[
            ("driver", ns.driver), ("mcu", "v1.1.4"), ("mlu", str(i)), ("model", model), ("node", ns.node),
            ("node_ip", f"10.20.{ns.node_index}.{10 + i}"), ("sn", ns.uid(i, 12).upper()), ("type", model),
            ("uuid", f"MLU-{ns.uid(i, 24)}"),
        ] for i in range(n)]
        series = [labels_text(pairs) for pairs in label_pairs]
        s = ns.sig

        def fam(name: str, help_: str, type_: str, values: np.ndarray) -> Family:
            masked = ns.masked(values)
            return family(name, help_, type_, {f"{name}{lab}": masked[:, i] for i, lab in enumerate(series)})

        return render([
            family("mlu_xid_error_count", "The xid error count of Cambricon MLU", "counter", {
                f"mlu_xid_error_count{labels_text([*pairs, ('xid', XID_FAULT)])}": ns.masked(s.fault_count)[:, i]
                for i, pairs in enumerate(label_pairs)}),
            fam("mlu_ecc_corrected_error_total", "The ecc corrected error count of Cambricon MLU", "counter",
                s.ecc_corrected),
            fam("mlu_d2d_crc_error_total", "The d2d crc error count of Cambricon MLU", "counter", s.link_errors),
            fam("mlu_utilization", "The utilization of Cambricon MLU, unit is '%'", "gauge", s.util * 100),
            fam("mlu_memory_used", "The physical memory used of Cambricon MLU, unit is 'B'", "gauge", s.mem_used),
            fam("mlu_memory_total", "The physical memory total of Cambricon MLU, unit is 'B'", "gauge", s.mem_total),
            fam("mlu_power_usage", "The power usage of Cambricon MLU, unit is 'w'", "gauge", s.power),
            fam("mlu_chip_temperature", "The chip temperature of Cambricon MLU, unit is 'celsius'", "gauge", s.temp),
            # the board runs cooler than the die: a secondary sensor the tiles must not take for the chip
            fam("mlu_temperature", "The board temperature of Cambricon MLU, unit is 'celsius'", "gauge", s.temp - 6),
            fam("mlu_frequency", "The frequency of Cambricon MLU, unit is 'MHz'", "gauge", s.clock / 1e6),
            fam("mlu_health", "The health state of Cambricon MLU, 1 means health, 0 means sick", "gauge", s.health),
        ], ns.ts_ms)


DIALECT = Cambricon()
