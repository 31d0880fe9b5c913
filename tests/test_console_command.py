"""`hetpool console` never leaves its Streamlit server behind: not on SIGTERM, not when it is killed."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.processes import free_port
from tests.test_serve import _ok, alive, children, wait_for


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGKILL])
def test_stopping_the_command_stops_the_server(fleet_db: Path, how: int) -> None:
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "app.cli", "--db", str(fleet_db), "console", "--port", str(port)],
                            cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: _ok(port), 60, "the console")
        (server,) = children(proc.pid)
        proc.send_signal(how)
        proc.wait(timeout=30)
        wait_for(lambda: not alive(server), 30, "the Streamlit server to end")
        assert not _ok(port)
        if how == signal.SIGTERM:
            assert proc.returncode == 0
    finally:
        if proc.poll() is None:
            proc.kill()
