"""Cambricon mlu-exporter (metrics prefix mlu): memory in bytes, common labels driver, mcu, mlu, node, ..."""

from __future__ import annotations

import numpy as np

from app.demo.dialects.base import NodeSlice
from app.demo.expo import Family, family, labels_text, render

MODEL = {"mlu370-x8": "MLU370-X8"}


class Cambricon:
    """mlu-exporter with its common label set; the node label names the host."""

    profile = "cambricon"

    def render(self, ns: NodeSlice) -> str:
        """Exposition text of the node's MLUs over the slice."""
        n = ns.sig.util.shape[1]
        model = MODEL.get(ns.lay.chip.id, ns.lay.chip.id)
        series = [labels_text([
            ("driver", ns.driver), ("mcu", "v1.1.4"), ("mlu", str(i)), ("model", model), ("node", ns.node),
            ("node_ip", f"10.20.{ns.node_index}.{10 + i}"), ("sn", ns.uid(i, 12).upper()), ("type", model),
            ("uuid", f"MLU-{ns.uid(i, 24)}"),
        ]) for i in range(n)]
        s = ns.sig

        def fam(name: str, help_: str, type_: str, values: np.ndarray) -> Family:
            masked = ns.masked(values)
            return family(name, help_, type_, {f"{name}{lab}": masked[:, i] for i, lab in enumerate(series)})

        return render([
            fam("mlu_utilization", "The utilization of Cambricon MLU, unit is '%'", "gauge", s.util * 100),
            fam("mlu_memory_used", "The physical memory used of Cambricon MLU, unit is 'B'", "gauge", s.mem_used),
            fam("mlu_memory_total", "The physical memory total of Cambricon MLU, unit is 'B'", "gauge", s.mem_total),
            fam("mlu_power_usage", "The power usage of Cambricon MLU, unit is 'w'", "gauge", s.power),
            fam("mlu_temperature", "The board temperature of Cambricon MLU, unit is 'celsius'", "gauge", s.temp),
            fam("mlu_frequency", "The frequency of Cambricon MLU, unit is 'MHz'", "gauge", s.clock / 1e6),
            fam("mlu_health", "The health state of Cambricon MLU, 1 means health, 0 means sick", "gauge", s.health),
        ], ns.ts_ms)


DIALECT = Cambricon()
