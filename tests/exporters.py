"""Exporters on 127.0.0.1 for tests: one whose body the test sets, and a live one with new samples every second."""

from __future__ import annotations

import gzip
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# dcgm-exporter fields the live exporter serves, with the canonical metric and factor each becomes
LIVE_METRICS = {"DCGM_FI_DEV_GPU_UTIL": ("accelerator.utilization", 0.01),
                "DCGM_FI_DEV_POWER_USAGE": ("accelerator.power", 1.0),
                "DCGM_FI_DEV_GPU_TEMP": ("accelerator.temperature", 1.0)}


class Exporter:
    """A /metrics endpoint whose body the test sets; every request is recorded."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        self.bodies: dict[str, bytes] = {}
        self.dynamic: dict[str, Callable[[], bytes]] = {}
        self.gzip = False
        self.content_type = "text/plain; version=0.0.4"
        self.requests: list[dict[str, str]] = []
        exporter = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                exporter.requests.append(dict(self.headers))
                make = exporter.dynamic.get(self.path)
                body = make() if make is not None else exporter.bodies.get(self.path)
                if body is None:
                    self.send_error(404, "no such endpoint")
                    return
                self.send_response(200)
                self.send_header("Content-Type", exporter.content_type)
                if exporter.gzip:
                    body = gzip.compress(body)
                    self.send_header("Content-Encoding", "gzip")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.host = host  # any 127.x.y.z is loopback: a host of its own gives each exporter its own node name
        self.server = ThreadingHTTPServer((host, 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def url(self, path: str) -> str:
        return f"http://{self.host}:{self.server.server_address[1]}{path}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class LiveExporter(Exporter):
    """A dcgm-exporter of `devices` GPUs on one node whose samples change every second, with timestamps.

    Every sample it ever served is kept in `served` as (metric name, gpu, ts_ms) -> value, whoever asked,
    so a test can reconcile the store with exactly what left the exporter.
    """

    def __init__(self, node: str = "h100-a-01", devices: int = 2, clock: Callable[[], float] = time.time):
        super().__init__()
        self.node = node
        self.devices = devices
        self.clock = clock
        self.served: dict[tuple[str, int, int], float] = {}
        self.serving = True
        self._lock = threading.Lock()
        self.dynamic["/metrics"] = self.body

    def value(self, name: str, gpu: int, second: int) -> float:
        """Deterministic, in range for the metric."""
        k = second + 7 * gpu
        return float({"DCGM_FI_DEV_GPU_UTIL": k % 101, "DCGM_FI_DEV_POWER_USAGE": 200 + k % 400,
                      "DCGM_FI_DEV_GPU_TEMP": 40 + k % 45}[name])

    def body(self) -> bytes:
        """This second's samples (nothing once `serving` is off: a target with no device metrics)."""
        if not self.serving:
            return b"# HELP dcgm_exporter_up Exporter up.\n# TYPE dcgm_exporter_up gauge\ndcgm_exporter_up 1\n"
        second = int(self.clock())
        lines = []
        with self._lock:
            for name in LIVE_METRICS:
                lines.append(f"# TYPE {name} gauge\n")
                for gpu in range(self.devices):
                    v = self.value(name, gpu, second)
                    self.served[(name, gpu, second * 1000)] = v
                    lines.append(f'{name}{{gpu="{gpu}",Hostname="{self.node}",modelName="NVIDIA H100 80GB HBM3"}} '
                                 f"{v:g} {second * 1000}\n")
        return "".join(lines).encode()

    def expected_rows(self) -> set[tuple[int, str, str, str, float]]:
        """(ts, node, device, canonical metric, value) of everything served."""
        with self._lock:
            return {(ts, self.node, str(gpu), LIVE_METRICS[name][0], round(v * LIVE_METRICS[name][1], 9))
                    for (name, gpu, ts), v in self.served.items()}
