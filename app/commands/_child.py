"""Child processes of a command (the console's Streamlit server): they stop when the command stops.

SIGTERM or Ctrl-C of the command stops the child and waits for it; if the command itself is killed, the
kernel sends the child SIGTERM (Linux's parent-death signal), so no server is left orphaned on its port.
"""

from __future__ import annotations

import contextlib
import ctypes
import signal
import subprocess
import sys
from collections.abc import Iterator, Mapping
from types import FrameType

STOP_WAIT_S = 15.0
_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """Runs in the child between fork and exec."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def start(cmd: list[str], env: Mapping[str, str]) -> subprocess.Popen[bytes]:
    """Start a child that dies with this process."""
    return subprocess.Popen(cmd, env=dict(env), preexec_fn=_die_with_parent)


def stop(child: subprocess.Popen[bytes], timeout_s: float = STOP_WAIT_S) -> int:
    """SIGTERM, then SIGKILL after a grace period; returns the exit code."""
    if child.poll() is None:
        child.terminate()
        try:
            return child.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            child.kill()
    return child.wait()


@contextlib.contextmanager
def terminate_on_sigterm() -> Iterator[None]:
    """Turn SIGTERM into KeyboardInterrupt in the main thread, so `finally` blocks stop children cleanly."""
    def handler(_signum: int, _frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread: leave signals alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def run(cmd: list[str], env: Mapping[str, str]) -> int:
    """Run a child in the foreground until it exits, or until this command is stopped (then stop it too)."""
    with terminate_on_sigterm():
        child = start(cmd, env)
        try:
            while True:
                # short waits, not one long one: a signal caught by another thread of this process is only
                # acted on once the main thread is back in Python
                try:
                    return child.wait(timeout=0.5)
                except subprocess.TimeoutExpired:
                    continue
        except KeyboardInterrupt:
            stop(child)
            return 0
