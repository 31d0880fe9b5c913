"""The health endpoint of `hetpool serve`: each collector's last run, lag, rows, rejects and last error.

`GET /health` answers 200 when every collector is healthy and 503 otherwise, with the reasons in the body;
unlike an exporter that says 200 while it serves nothing, a collector that stores nothing is not healthy.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from canonical.timeunits import iso_utc

Report = Callable[[], dict[str, Any]]


def health_report(statuses: list[dict[str, Any]], extra: dict[str, Any] | None = None,
                  jobs: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """The body: overall status, the problems in one list, every collector, and each other job (the export)
    under its own name; a job's problems count like a collector's."""
    jobs = jobs or {}
    problems = [f"{s['name']}: {p}" for s in statuses for p in s["problems"]]
    problems += [f"{name}: {p}" for name, job in jobs.items() for p in job["problems"]]
    return {"status": "healthy" if not problems else "unhealthy", "problems": problems,
            "checked_at": iso_utc(time.time()), "collectors": statuses, **jobs, **(extra or {})}


class HealthServer:
    """A small HTTP server on its own thread."""

    def __init__(self, address: str, port: int, report: Report):
        handler = _handler(report)
        self.httpd = ThreadingHTTPServer((address, port), handler)
        self.httpd.daemon_threads = True
        self.url = f"http://{address}:{self.httpd.server_address[1]}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="health", daemon=True)

    def start(self) -> HealthServer:
        """Serve until stopped."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket."""
        self.httpd.shutdown()
        self.httpd.server_close()


def _handler(report: Report) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path.split("?")[0] not in ("/", "/health", "/healthz"):
                self._send(404, {"error": f"no such path {self.path!r}; try /health"})
                return
            body = report()
            self._send(200 if body["status"] == "healthy" else 503, body)

        def _send(self, code: int, body: dict[str, Any]) -> None:
            data = json.dumps(body, indent=2, sort_keys=True, default=str).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            return  # no access log: health checks every few seconds would drown the collectors' lines

    return Handler
