"""A real Prometheus on loopback with history backfilled by promtool, plus the fixture fleet it serves."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from tests.processes import free_port, start_server, stop

T0_S = 1_793_491_200  # 2026-11-01T00:00:00Z, start of the fixture history
STEP_S = 15


@dataclass(frozen=True)
class Series:
    """One fixture series: exposition name, labels, and its value at step k."""

    family: str
    kind: str  # gauge, counter or histogram
    name: str
    labels: dict[str, str]
    index: int

    def value(self, k: int) -> float:
        """Deterministic value at step k, chosen so each metric stays in its plausible range."""
        i = self.index
        base = self.family
        if base.endswith(("GPU_UTIL", "gfx_activity", "chip_info_utilization")):
            return float((i * 7 + k) % 101)  # percent, 0..100
        if base.endswith(("FB_USED", "used_vram", "hbm_used_memory")):
            return float(1000 + (i * 13 + k) % 500)  # MiB
        if base.endswith(("POWER_USAGE", "power_usage", "chip_info_power")):
            return float(100 + (i + k) % 300)  # W
        if base.endswith(("GPU_TEMP", "junction_temperature", "chip_info_temperature")):
            return float(40 + (i + k) % 40)  # Celsius
        if base.endswith("num_requests_running"):
            return float((i + k) % 17)
        if base.endswith("prompt_tokens"):
            return float(k * 100 + i)  # a counter: only grows
        if base.endswith("time_to_first_token_seconds"):
            share = {"0.1": 1, "0.5": 3, "1.0": 4, "+Inf": 5}[self.labels["le"]]
            return float(k * share)  # cumulative buckets: 1/5 under 0.1 s, 3/5 under 0.5 s, ...
        raise ValueError(base)


@dataclass
class FixtureFleet:
    """Two DCGM hosts, one AMD host, one Ascend host and a vLLM engine, as Prometheus would have scraped them."""

    hours: int = 24
    series: list[Series] = field(default_factory=list)
    t0_s: int = T0_S  # time of the first sample

    def __post_init__(self) -> None:
        i = 0

        def add(family: str, kind: str, labels: dict[str, str], name: str | None = None) -> None:
            nonlocal i
            self.series.append(Series(family, kind, name or family, labels, i))
            i += 1

        for node in ("h100-a-01", "h100-a-02"):
            for gpu in ("0", "1"):
                labels = {"gpu": gpu, "UUID": f"GPU-{node}-{gpu}", "device": f"nvidia{gpu}",
                          "modelName": "NVIDIA H100 80GB HBM3", "Hostname": node,
                          "DCGM_FI_DRIVER_VERSION": "550.144.03", "instance": f"{node}:9400", "job": "dcgm"}
                for family in ("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_POWER_USAGE",
                               "DCGM_FI_DEV_GPU_TEMP"):
                    add(family, "gauge", labels)
        for gpu in ("0", "1"):
            labels = {"gpu_id": gpu, "hostname": "mi300x-a-01", "card_model": "MI300X", "serial_number": f"S{gpu}",
                      "instance": "mi300x-a-01:5000", "job": "amd"}
            for family in ("gpu_gfx_activity", "gpu_used_vram", "gpu_power_usage", "gpu_junction_temperature"):
                add(family, "gauge", labels)
        for npu in ("0", "1"):
            labels = {"id": npu, "model_name": "910B3", "vdie_id": f"V-{npu}", "pcie_bus_info": f"0000:{npu}1:00.0",
                      "instance": "ascend-a-01:8082", "job": "npu"}
            for family in ("npu_chip_info_utilization", "npu_chip_info_hbm_used_memory", "npu_chip_info_power",
                           "npu_chip_info_temperature"):
                add(family, "gauge", labels)
        engine = {"model_name": "llama-3.1-70b", "instance": "h100-a-01:8000", "job": "vllm"}
        add("vllm:num_requests_running", "gauge", engine)
        add("vllm:prompt_tokens", "counter", engine, "vllm:prompt_tokens_total")
        for le in ("0.1", "0.5", "1.0", "+Inf"):
            add("vllm:time_to_first_token_seconds", "histogram", {**engine, "le": le},
                "vllm:time_to_first_token_seconds_bucket")

    @property
    def steps(self) -> int:
        """Samples per series."""
        return self.hours * 3600 // STEP_S

    @property
    def end_s(self) -> int:
        """Timestamp of the last sample."""
        return self.t0_s + (self.steps - 1) * STEP_S

    def openmetrics(self) -> Iterator[str]:
        """The whole history as OpenMetrics text, series by series."""
        families: dict[str, list[Series]] = {}
        for s in self.series:
            families.setdefault(s.family, []).append(s)
        for family, members in families.items():
            yield f"# TYPE {family} {members[0].kind}\n"
            for s in members:
                lbl = ",".join(f'{k}="{v}"' for k, v in s.labels.items())
                yield "".join(f"{s.name}{{{lbl}}} {s.value(k):g} {self.t0_s + k * STEP_S}\n" for k in range(self.steps))
        yield "# EOF\n"


class History(Protocol):
    """Anything that can write its history as OpenMetrics text."""

    def openmetrics(self) -> Iterator[str]:
        """The history, in pieces."""
        ...


class PrometheusServer:
    """Backfill with promtool (when given a history), then serve on a free loopback port until stopped.

    `targets` are host:port addresses it scrapes itself every `interval`, honoring their timestamps (and, with
    `honor_labels`, their labels over its own); `rules` is a rules file it evaluates every `interval`.
    """

    def __init__(self, workdir: Path, fleet: History | None, targets: tuple[str, ...] = (), interval: str = "15s",
                 rules: Path | None = None, honor_labels: bool = False):
        self.workdir = workdir
        self.fleet = fleet
        self.targets = targets
        self.interval = interval
        self.rules = rules  # a rules file, evaluated every `interval`
        self.honor_labels = honor_labels
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> PrometheusServer:
        """Write the history, create TSDB blocks, start the server and wait until it is ready."""
        for tool in ("prometheus", "promtool"):
            if shutil.which(tool) is None:
                raise RuntimeError(f"{tool} not found; `make test` installs the Debian prometheus package")
        data = self.workdir / "tsdb"
        if self.fleet is not None:
            om = self.workdir / "history.om"
            with om.open("w") as f:
                f.writelines(self.fleet.openmetrics())
            subprocess.run(["promtool", "tsdb", "create-blocks-from", "openmetrics", str(om), str(data)],
                           check=True, capture_output=True, timeout=600)
            om.unlink()
        config = self.workdir / "prometheus.yml"
        scrape = "" if not self.targets else (
            f"scrape_configs:\n  - job_name: exporter\n    scrape_interval: {self.interval}\n"
            f"    honor_labels: {str(self.honor_labels).lower()}\n"
            f"    static_configs:\n      - targets: [{', '.join(repr(t) for t in self.targets)}]\n")
        rules = "" if self.rules is None else (
            f"  evaluation_interval: {self.interval}\nrule_files: [{str(self.rules)!r}]\n")
        config.write_text(f"global:\n  scrape_interval: {self.interval}\n{rules}{scrape}")
        self.proc = start_server(
            ["prometheus", f"--config.file={config}", f"--storage.tsdb.path={data}",
             "--storage.tsdb.retention.time=3650d", f"--web.listen-address=127.0.0.1:{self.port}"],
            self.workdir / "prometheus.log", f"{self.url}/-/ready", "prometheus", 60)
        return self

    def stop(self) -> None:
        """Terminate the server this object started."""
        stop(self.proc)
