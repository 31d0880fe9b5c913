"""The compiled replica: used only when its build is of the current sources, and the same results as pure Python."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from replay import compiled

REPO = Path(__file__).resolve().parent.parent


def copy_sources(root: Path) -> None:
    """The compiled modules' sources under a scratch checkout."""
    for module in compiled.MODULES:
        dst = Path(compiled.source_path(str(root), module))
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(compiled.source_path(str(REPO), module), dst)
        for package in (dst.parent, *dst.parent.parents):  # empty packages, as mypyc names modules by them
            if package == root:
                break
            (package / "__init__.py").touch()


def write_build(root: Path, digest: str | None = None, files: dict[str, str] | None = None,
                text: str | None = None) -> Path:
    """A build directory with a stamp (and empty files for the ones it names)."""
    where = Path(compiled.build_dir(str(root)))
    where.mkdir(parents=True, exist_ok=True)
    names = (compiled.GROUP + "__mypyc", *compiled.MODULES)
    files = files if files is not None else {n: n + ".so" for n in names}
    for f in files.values():
        (where / f).write_bytes(b"")
    stamp = text if text is not None else json.dumps(
        {"digest": digest if digest is not None else compiled.sources_digest(str(root)), "files": files})
    (where / compiled.STAMP).write_text(stamp)
    return where


def test_a_build_of_the_current_sources_is_chosen_with_its_files_group_first(tmp_path: Path) -> None:
    copy_sources(tmp_path)
    where = write_build(tmp_path)
    choice = compiled.choose(str(tmp_path), {})
    assert choice.compiled and choice.reason == "compiled with mypyc"
    assert [n for n, _ in choice.files] == [compiled.GROUP + "__mypyc", *compiled.MODULES]
    assert all(Path(p).parent == where for _, p in choice.files)


def _edit(root: Path) -> None:
    path = Path(compiled.source_path(str(root), "replay.replica"))
    path.write_text(path.read_text() + "\n# edited\n")


CASES: list[tuple[str, Any, str]] = [
    ("no build", None, "no compiled build: run `make native`"),
    ("switched off", "switch", "pure Python (HETPOOL_COMPILED=0)"),
    ("a source edited since", "edit", "the compiled build is of older sources: run `make native`"),
    ("a routing policy added since", "policy", "the compiled build is of older sources: run `make native`"),
    ("another digest", {"digest": "0" * 64}, "of older sources"),
    ("broken stamp", {"text": "{not json"}, "unreadable build stamp"),
    ("stamp without files", {"text": json.dumps({"digest": "x"})}, "unreadable build stamp"),
    ("a module missing", {"files": {compiled.GROUP + "__mypyc": "g.so", "replay.book": "b.so"}},
     "expected ["),
]


@pytest.mark.parametrize(("case", "setup", "reason"), CASES, ids=[c[0] for c in CASES])
def test_any_doubt_about_the_build_runs_the_pure_python_and_says_why(tmp_path: Path, case: str, setup: Any,
                                                                     reason: str) -> None:
    copy_sources(tmp_path)
    environ = {}
    if setup == "switch":
        write_build(tmp_path)
        environ = {compiled.SWITCH: "0"}
    elif setup == "edit":
        write_build(tmp_path)
        _edit(tmp_path)
    elif setup == "policy":  # a policy written in Python could not subclass the compiled bases: it is compiled too
        write_build(tmp_path)
        (tmp_path / "replay" / "policies" / "newest.py").write_text("POLICY = None\n")
        assert "replay.policies.newest" in compiled.modules(str(tmp_path))
    elif isinstance(setup, dict):
        write_build(tmp_path, **setup)
    choice = compiled.choose(str(tmp_path), environ)
    assert not choice.compiled and choice.files == ()
    assert choice.reason.startswith("pure Python (") and reason in choice.reason


def test_a_build_that_does_not_load_leaves_the_imports_as_they_were(tmp_path: Path) -> None:
    copy_sources(tmp_path)
    where = write_build(tmp_path)
    (where / (compiled.GROUP + "__mypyc.so")).write_bytes(b"\x7fELF not really")
    modules: dict[str, Any] = {}
    finders: list[object] = []
    status = compiled.install(compiled.choose(str(tmp_path), {}), modules, finders)
    assert status.startswith("pure Python (the compiled build did not load: ")
    assert modules == {} and finders == []


def test_modules_imported_before_the_build_keep_the_pure_python(tmp_path: Path) -> None:
    copy_sources(tmp_path)
    write_build(tmp_path)
    finders: list[object] = []
    status = compiled.install(compiled.choose(str(tmp_path), {}), {"replay.replica": sys}, finders)
    assert "imported before" in status and finders == []


# Every policy, overload with preemption and rejection, noise, failures and throttling, the step terms, both
# schedules and the closed loop: a digest of every per-request column and of the bench points, in one process per mode.
SCENARIOS = r"""
import dataclasses, hashlib, json, sys
sys.path.insert(0, sys.argv[1])
from benchmarks.bench_replay import shaped, six_pool_fleet, traffic
from replay import Candidate, SlaTier, closed_loop, compiled, run_replay
from replay.candidate import FaultSpec, PoolFaults, PoolOverride
from replay.fleet import resolve_pools
from replay.policies import POLICIES
from pool_registry import load_registry
from tests.test_bench import h100_pool
import polars as pl
reg = six_pool_fleet()
tier = {"standard": SlaTier(ttft_s=1.0, e2e_s=30.0)}
frame = traffic(6000, rate=150)
runs = [(Candidate(name=n, policy=n, sla_tiers=tier), frame, reg) for n in POLICIES]
runs.append((Candidate(name="terms", sla_tiers=tier, noise=0.1), frame, shaped(reg)))
first = {p.id: PoolOverride(schedule="prefill_first") for p in reg.pools}  # SGLang's schedule, every term on
runs.append((Candidate(name="prompts first", sla_tiers=tier, pools=first), frame, shaped(reg)))
small = {p.id: PoolOverride(replicas=1, max_concurrency=8, max_queue=20) for p in reg.pools}
runs.append((Candidate(name="overload", policy="least_loaded", overflow="reject", pools=small), traffic(4000, 900),
             reg))
faults = FaultSpec(repair_s=5.0, pools={p.id: PoolFaults(failures_per_device_hour=40.0, throttled_share=0.3,
    throttled_clock=0.6) for p in reg.pools})
runs.append((Candidate(name="faults", sla_tiers=tier, faults=faults), frame, reg))
tight = h100_pool(load_registry(sys.argv[1] + "/examples/fleet.yaml"), 2)  # KV outgrown: preemption
runs.append((Candidate(name="kv", policy="cost_min"), pl.DataFrame({"arrival_ms": [0] * 64, "in_tokens": 8192,
                                                                     "out_tokens": 256}), tight))
h, counts = hashlib.sha256(), []
for cand, fr, r in runs:
    out = run_replay(cand, fr, r, 3)
    counts.append((out.summary.served, out.summary.preempted, sum(out.summary.overflow.values())))
    h.update(out.requests.write_csv().encode())
    h.update(repr(sorted(dataclasses.asdict(out.summary).items())).encode())
spec = resolve_pools(reg, Candidate(name="b"))[0]
for c in (1, 2, 8, 32):
    h.update(repr(closed_loop(spec, c, 1024, 128, 64, range_ratio=0.5, seed=c)).encode())
print(json.dumps(counts))
print(compiled.STATUS)
print(h.hexdigest())
"""


def _run(environ: dict[str, str]) -> tuple[str, str]:
    env = {**os.environ, "POLARS_MAX_THREADS": "1", **environ}
    done = subprocess.run([sys.executable, "-c", SCENARIOS, str(REPO)], capture_output=True, text=True, env=env,
                          cwd=REPO, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    counts, status, digest = done.stdout.strip().splitlines()[-3:]
    served = json.loads(counts)
    # the scenarios reach what they are there for: rejections, failures' requeues, preemption
    assert any(rejected for _, _, rejected in served) and any(preempted for _, preempted, _ in served)
    return status, digest


def test_the_compiled_replica_gives_the_pure_pythons_results_to_the_last_bit() -> None:
    pure_status, pure = _run({compiled.SWITCH: "0"})
    assert pure_status == "pure Python (HETPOOL_COMPILED=0)"
    status, digest = _run({compiled.SWITCH: ""})
    if not status.startswith("compiled"):
        pytest.skip(f"no compiled build to compare ({status}); `make native` builds it")
    assert digest == pure


LOAD_FROM = r"""
import importlib.util, sys
spec = importlib.util.spec_from_file_location("_c", sys.argv[2] + "/replay/compiled.py")
c = importlib.util.module_from_spec(spec); sys.modules["_c"] = c; spec.loader.exec_module(c)
print(c.install(c.choose(sys.argv[2], {})))
sys.path.insert(0, sys.argv[1])
import replay.replica, replay.simulator
print(replay.replica.__file__)
print(replay.simulator.__file__)
"""


@pytest.mark.slow
def test_the_build_script_compiles_a_checkout_that_then_loads_its_own_build(tmp_path: Path) -> None:
    copy_sources(tmp_path)
    shutil.copy(REPO / "replay" / "compiled.py", tmp_path / "replay" / "compiled.py")
    script = [sys.executable, str(REPO / "scripts" / "build_native.py"), "--root", str(tmp_path), "--strict"]
    built = subprocess.run(script, capture_output=True, text=True, timeout=600, check=False)
    assert built.returncode == 0, built.stderr[-3000:]
    assert "native: compiled replay.book" in built.stdout
    assert compiled.choose(str(tmp_path), {}).compiled
    again = subprocess.run(script, capture_output=True, text=True, timeout=600, check=False)
    assert "is up to date" in again.stdout
    env = {**os.environ, compiled.SWITCH: "0"}  # the checkout's own build stays out of it
    done = subprocess.run([sys.executable, "-c", LOAD_FROM, str(REPO), str(tmp_path)], capture_output=True, text=True,
                          env=env, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    status, replica, simulator = done.stdout.strip().splitlines()[-3:]
    assert status == "compiled with mypyc"
    where = compiled.build_dir(str(tmp_path))
    assert replica.startswith(where) and simulator.startswith(where)
    _edit(tmp_path)  # and an edit makes it stale again
    assert "older sources" in compiled.choose(str(tmp_path), {}).reason
