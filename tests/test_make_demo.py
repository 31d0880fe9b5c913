"""`make demo` on a clean checkout (the repository's tracked files, nothing installed) installs what the console and
the CLI need and no test extra, builds a demo and answers on its port."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import tomllib
import urllib.request
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.conftest import REPO
from tests.processes import free_port, stop_group

pytestmark = pytest.mark.slow  # a virtualenv from nothing: about a minute of pip

PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
RUNTIME = {canonicalize_name(Requirement(r).name) for r in PROJECT["dependencies"]}
TEST_ONLY = {canonicalize_name(Requirement(r).name) for r in PROJECT["optional-dependencies"]["test"]} - RUNTIME
ANSWER_S = 600  # far above the two minutes measured: a slow machine must not fail this, the figure is in README


def clean_checkout(into: Path) -> Path:
    """The tracked files of the working tree, as a fresh clone has them: no .venv, no .native, no demo."""
    listed = subprocess.run(["git", "-C", str(REPO), "ls-files", "-z"], check=True, capture_output=True).stdout
    for name in listed.decode().split("\0"):
        if name and (REPO / name).is_file():
            (into / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, into / name)
    return into


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as r:
            return r.read().strip() == b"ok"
    except OSError:
        return False


def test_the_test_extra_is_known() -> None:
    assert {"pytest", "playwright", "mypy", "ruff", "ray", "hypothesis"} <= TEST_ONLY
    assert "streamlit" in RUNTIME and not TEST_ONLY & RUNTIME


def test_make_demo_on_a_clean_checkout_installs_no_test_extra(tmp_path: Path) -> None:
    checkout = clean_checkout(tmp_path / "checkout")
    assert not (checkout / ".venv").exists() and (checkout / "Makefile").is_file()
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "HETPOOL_DB", "PYTHONPATH")}
    env["HOME"] = str(tmp_path)  # streamlit writes its machine id under $HOME
    log = (tmp_path / "make.log").open("wb")
    proc = subprocess.Popen(["make", "demo", f"PORT={port}", "DEMO_ARGS=--days 0.1 --devices-per-pool 2"],
                            cwd=checkout, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + ANSWER_S
        while not answers(url):
            assert proc.poll() is None, (tmp_path / "make.log").read_text(errors="replace")[-3000:]
            assert time.monotonic() < deadline, f"make demo did not answer on {port} in {ANSWER_S} s"
            time.sleep(1)
    finally:
        stop_group(proc, 30)
        log.close()
    listed = subprocess.run(
        [str(checkout / ".venv" / "bin" / "python"), "-c", "import importlib.metadata as m, json; "
         "print(json.dumps([d.metadata['Name'] for d in m.distributions()]))"],
        check=True, capture_output=True, text=True).stdout
    installed = {canonicalize_name(n) for n in json.loads(listed)}
    assert installed & TEST_ONLY == set(), f"make demo installed test extras: {sorted(installed & TEST_ONLY)}"
    assert installed >= RUNTIME and "hetpool" in installed
    assert not (checkout / ".native").exists()  # no mypyc build: that needs the test extra's mypy
    assert (checkout / "demo" / "hetpool.duckdb").is_file()
