"""A real headless Chromium (Debian's, never a downloaded one) opens every page of a running `hetpool console`.

Fails on any Streamlit exception box or "page not found" dialog; saves a screenshot per page under
test-artifacts/ for a person to look at.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.browser

CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = REPO / "test-artifacts"
LAUNCH_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
               "--disable-sync", "--no-first-run"]
PAGES = [  # (url path, title, text that must be on the page once it has run)
    ("", "Fleet health", "Devices reporting"),
    ("reliability", "Errors and reliability", "Nodes to drain"),
    ("versions", "Versions", "Model × pool compatibility"),
    ("onboarding", "Onboarding", "Detail of pool"),
    ("cost", "Cost", "Cost per million tokens"),
    ("replay", "Replay what-if", "Run replay"),
    ("export", "Export", "Rows (raw samples)"),
    ("collectors", "Collectors", "Sources, by their last ingest run"),
    ("fleet", "Fleet registry", "Vendors"),
    ("node", "Node", "Pick a node above"),
    ("device", "Device", "Pick a device above"),
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_healthy(url: str, proc: subprocess.Popen[bytes], timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"hetpool console exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as r:
                if r.read().strip() == b"ok":
                    return
        except OSError:
            time.sleep(0.3)
    raise AssertionError(f"console at {url} not healthy after {timeout_s}s")


@pytest.fixture(scope="module")
def console(demo_db: Path) -> Iterator[str]:
    """`hetpool console` on the demo database, in its own process group so that it stops with its streamlit."""
    port = free_port()
    env = {**os.environ, "HOME": str(demo_db.parent)}  # streamlit writes its machine id under $HOME
    proc = subprocess.Popen([sys.executable, "-m", "app.cli", "--db", str(demo_db), "console", "--port", str(port)],
                            cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, proc)
        yield url
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def test_every_page_opens_in_chromium_without_an_exception(console: str) -> None:
    assert CHROMIUM.exists(), "Debian chromium is missing; `make test` installs it (scripts/system-deps.sh)"
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=LAUNCH_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1500, "height": 2400})
            for path, title, text in PAGES:
                page.goto(f"{console}/{path}")
                page.locator("h1", has_text=title).first.wait_for(timeout=60_000)
                page.get_by_text(text).first.wait_for(timeout=60_000)
                page.locator('[data-testid="stStatusWidget"]').wait_for(state="hidden", timeout=60_000)
                page.wait_for_timeout(2500)  # let charts and tables draw before the screenshot
                shot = ARTIFACTS / f"console-{path or 'health'}.png"
                page.screenshot(path=str(shot), full_page=True)
                exceptions = page.locator('[data-testid="stException"]')
                assert exceptions.count() == 0, f"/{path}: {exceptions.first.inner_text()}"
                assert page.get_by_text("Page not found").count() == 0, f"/{path} was not found"
                assert shot.stat().st_size > 10_000
        finally:
            browser.close()


def test_fleet_health_in_the_browser_shows_the_story(console: str) -> None:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=LAUNCH_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1500, "height": 2400})
            page.goto(console)
            page.get_by_text("Worst devices").first.wait_for(timeout=60_000)
            page.locator('[data-testid="stVegaLiteChart"]').nth(5).wait_for(timeout=60_000)
            assert page.locator('[data-testid="stMetric"]').count() == 40  # 5 pools x 8 tiles
            assert page.get_by_text("1 / 2").count() == 2                    # h100-a and the onboarding pool
            assert page.locator('[data-testid="stException"]').count() == 0
        finally:
            browser.close()
