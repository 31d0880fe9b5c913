"""AMD ROCm device-metrics-exporter: client_golang output, labels sorted, memory in MB (MiB in practice)."""

from __future__ import annotations

import numpy as np

from app.demo.dialects.base import NodeSlice
from app.demo.expo import Family, family, labels_text, render

MIB = 1024**2
CARD_MODEL = {"mi300x": "MI300X-O"}
AFID_FAULT = 30   # field identifiers of the last RAS event, by severity
AFID_NOTICE = 25


class Amd:
    """device-metrics-exporter 1.x with driver and vbios version labels enabled."""

    profile = "amd"

    def render(self, ns: NodeSlice) -> str:
        """Exposition text of the node's GPUs over the slice."""
        vbios = ns.lay.pool.stack.get("vbios", "")
        n = ns.sig.util.shape[1]

        def labels(i: int, extra: tuple[tuple[str, str], ...] = ()) -> str:
            pairs = [("card_model", CARD_MODEL.get(ns.lay.chip.id, ns.lay.chip.id)), ("container", ""),
                     ("driver_version", ns.driver), ("gpu_compute_partition_type", "spx"), ("gpu_id", str(i)),
                     ("gpu_memory_partition_type", "nps1"), ("gpu_partition_id", "0"),
                     ("gpu_uuid", ns.uid(i, 16)), ("hostname", ns.node), ("job_id", ""), ("job_partition", ""),
                     ("job_user", ""), ("namespace", ""), ("pod", ""), ("serial_number", ns.uid(i, 12).upper()),
                     ("vbios_version", vbios), *extra]
            return labels_text(sorted(pairs))

        s = ns.sig

        def fam(name: str, help_: str, values: np.ndarray, decimals: int = 0,
                extra: tuple[tuple[str, str], ...] = ()) -> Family:
            masked = ns.masked(values)
            return family(name, help_, "gauge", {f"{name}{labels(i, extra)}": masked[:, i] for i in range(n)},
                          decimals)

        return render([
            fam("gpu_clock", "List of current GPU clock frequencies in MHz", s.clock / 1e6,
                extra=(("clock_index", "0"), ("clock_type", "system"))),
            family("gpu_afid_errors", "Last RAS event field identifier", "gauge", {
                f"gpu_afid_errors{labels(i, (('afid_index', '0'), ('severity', severity)))}": ns.masked(v)[:, i]
                for severity, v in (("non_fatal_uncorrected", np.where(s.fault, AFID_FAULT, 0)),
                                    ("non_fatal_corrected", np.where(s.notice, AFID_NOTICE, 0)))
                for i in range(n)}),
            fam("gpu_ecc_correct_total", "Total Correctable error count", s.ecc_corrected),
            fam("gpu_ecc_uncorrect_total", "Total Uncorrectable error count", s.ecc_uncorrectable),
            fam("gpu_energy_consumed", "Accumulated energy consumed by the GPU in uJ", s.energy * 1e6),
            fam("gpu_gfx_activity", "Graphics engine usage in Percentage (0-100)", s.util * 100),
            fam("gpu_health", "Health of the GPU (0 = Unhealthy | 1 = Healthy)", s.health),
            fam("gpu_junction_temperature", "Current junction/hotspot temperature in Celsius", s.temp),
            fam("gpu_power_usage", "GPU Power usage in Watts", s.power),
            fam("gpu_total_vram", "Total VRAM memory of the GPU (in MB)", np.round(s.mem_total / MIB) - 1024),
            fam("gpu_used_vram", "Used VRAM memory of the GPU (in MB)", np.round(s.mem_used / MIB) - 1024),
            fam("pcie_replay_count", "Total number of PCIe replays", s.link_errors),
        ], ns.ts_ms)


DIALECT = Amd()
