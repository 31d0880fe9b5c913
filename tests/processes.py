"""The real processes the tests start: a free port, a server started and waited for until it answers, stopped by
the test that started it; the live console; headless Chromium."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = REPO / "test-artifacts"
LAUNCH_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
               "--disable-sync", "--no-first-run"]


def free_port() -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_ready(url: str, proc: subprocess.Popen[bytes], name: str, timeout_s: float,
               ok: Callable[[bytes], bool] = lambda body: True, log: Path | None = None) -> None:
    """Wait until GET url answers 200 with a body `ok` accepts; an error (with the log's tail) if the process exits
    first or the time runs out."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = log.read_text(errors="replace")[-2000:] if log is not None and log.exists() else ""
            raise RuntimeError(f"{name} exited with {proc.returncode}: {tail}")
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200 and ok(r.read()):
                    return
        except OSError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"{name} at {url} did not become ready within {timeout_s:g} s")


def start_server(cmd: Sequence[str], log: Path, ready_url: str, name: str, timeout_s: float) -> subprocess.Popen[bytes]:
    """Start a server writing to `log` and wait until `ready_url` answers 200."""
    with log.open("wb") as out:
        proc = subprocess.Popen(list(cmd), stdout=out, stderr=subprocess.STDOUT)
    wait_ready(ready_url, proc, name, timeout_s, log=log)
    return proc


def stop(proc: subprocess.Popen[bytes] | None, timeout_s: float = 20) -> None:
    """Terminate a process this test started, then kill it if it does not end."""
    if proc is not None and proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def stop_group(proc: subprocess.Popen[bytes], timeout_s: float = 20) -> None:
    """SIGTERM the process group a test started (start_new_session), then SIGKILL it if it does not end."""
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


@contextmanager
def running_console(db: Path, home: Path, args: Sequence[str] = (), env: dict[str, str] | None = None
                    ) -> Iterator[str]:
    """`hetpool console` on a database, with extra options (`{port}` in them filled in) and environment, in its own
    process group so that it stops with its streamlit; yields its URL once it is healthy."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "app.cli", "--db", str(db), "console", "--port", str(port),
                             *[a.replace("{port}", str(port)) for a in args]],
                            cwd=REPO, env={**os.environ, "HOME": str(home), **(env or {})},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(f"{url}/_stcore/health", proc, "hetpool console", 60, ok=lambda body: body.strip() == b"ok")
        yield url
    finally:
        stop_group(proc)


@contextmanager
def chromium() -> Iterator[Any]:
    """Debian's headless Chromium under Playwright (never a browser of Playwright's own download)."""
    assert CHROMIUM.exists(), "Debian chromium is missing; `make test` installs it (scripts/system-deps.sh)"
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=LAUNCH_ARGS)
        try:
            yield browser
        finally:
            browser.close()
