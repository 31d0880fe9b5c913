"""A real Alertmanager on loopback: a free port, its own storage folder, no clustering, stopped by the test."""

from __future__ import annotations

import json
import shutil
import subprocess
import urllib.request
from pathlib import Path
from typing import Any

from tests.processes import free_port, start_server, stop

BINARY = "prometheus-alertmanager"  # the Debian package's name for it; upstream's tarball calls it alertmanager
CONFIG = "route:\n  receiver: nobody\n  group_wait: 1s\nreceivers:\n  - name: nobody\n"


def binary() -> str:
    """The Alertmanager binary; a clear failure (not a skip) when it is not installed."""
    for name in (BINARY, "alertmanager"):
        found = shutil.which(name)
        if found:
            return found
    raise RuntimeError(f"{BINARY} not found; `make test` installs the Debian prometheus-alertmanager package")


class AlertmanagerServer:
    """Start on a free port, wait until ready, and stop the process this object started."""

    def __init__(self, workdir: Path, port: int | None = None):
        self.workdir = workdir
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> AlertmanagerServer:
        """Write its configuration, start it, and wait for /-/ready."""
        exe = binary()
        config = self.workdir / "alertmanager.yml"
        config.write_text(CONFIG)
        self.proc = start_server(
            [exe, f"--config.file={config}", f"--storage.path={self.workdir / 'am-data'}",
             f"--web.listen-address=127.0.0.1:{self.port}", "--cluster.listen-address="],
            self.workdir / "alertmanager.log", f"{self.url}/-/ready", "alertmanager", 30)
        return self

    def get(self, path: str) -> Any:
        """GET a v2 API path and decode its JSON."""
        with urllib.request.urlopen(f"{self.url}{path}", timeout=5) as r:
            return json.load(r)

    def alerts(self) -> list[dict[str, Any]]:
        """The alerts it holds that are not resolved."""
        got: list[dict[str, Any]] = self.get("/api/v2/alerts")
        return got

    def stop(self) -> None:
        """Terminate the server this object started."""
        stop(self.proc)
