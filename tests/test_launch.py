"""The console's launcher imports the pages' layers before Streamlit starts, and none that needs its runtime."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from app.commands.console import CONSOLE_LAUNCH, CONSOLE_MAIN, streamlit_command

REPO = Path(__file__).resolve().parents[1]

PROBE = """
import json, runpy, sys
warmed = runpy.run_path({launch!r}, run_name="probe")["warm"]()
print(json.dumps({{"warmed": warmed, "streamlit": "streamlit" in sys.modules,
                  "replay": "replay.calibrate" in sys.modules,
                  "pages": sorted(m for m in sys.modules if m.startswith("app.console."))}}))
"""


def test_the_console_command_starts_streamlit_through_the_launcher() -> None:
    cmd = streamlit_command(8600, "127.0.0.1")
    assert cmd[:4] == [sys.executable, str(CONSOLE_LAUNCH), "run", str(CONSOLE_MAIN)]
    assert cmd[cmd.index("--server.port") + 1] == "8600"


def test_warm_imports_the_layers_and_not_streamlit_from_any_directory(tmp_path: Path) -> None:
    # from another directory, as `hetpool console` may be started: the launcher finds the project itself
    done = subprocess.run([sys.executable, "-c", PROBE.format(launch=str(CONSOLE_LAUNCH))], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert {"altair", "store.views.health", "app.status_read"} <= set(got["warmed"])
    assert got["replay"] is True  # the layers' user errors, which every page catches, bring the replay package
    # a module with st.cache_data imported before the runtime exists would keep a cache the runtime never sees
    assert got["streamlit"] is False and got["pages"] == []


def test_the_launcher_runs_streamlits_command_line() -> None:
    done = subprocess.run([sys.executable, str(CONSOLE_LAUNCH), "version"], cwd=REPO, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("Streamlit, version ")
    bad = subprocess.run([sys.executable, str(CONSOLE_LAUNCH), "no-such-command"], cwd=REPO, capture_output=True,
                         text=True, timeout=120)
    assert bad.returncode == 2 and "No such command 'no-such-command'" in bad.stderr
