"""The compiled replay: used only when its build is of the current sources and this Python, loaded without any
global import hook, with the same results as pure Python, and open to policies written in plain Python."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from replay import native

REPO = Path(__file__).resolve().parent.parent


def copy_sources(root: Path) -> None:
    """The compiled modules' sources under a scratch checkout."""
    for module in native.MODULES:
        dst = Path(native.source_path(str(root), module))
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(native.source_path(str(REPO), module), dst)


def write_build(root: Path, digest: str | None = None, files: list[str] | None = None, text: str | None = None,
                **stamp: str) -> Path:
    """A build directory with a stamp, and empty files for the ones it names."""
    where = Path(native.build_dir(str(root)))
    names = files if files is not None else [native.module_file(m) for m in (native.GROUP + "__mypyc",
                                                                               *native.MODULES)]
    for f in names:
        (where / f).parent.mkdir(parents=True, exist_ok=True)
        (where / f).write_bytes(b"")
    where.mkdir(parents=True, exist_ok=True)
    body = text if text is not None else json.dumps({
        "digest": digest if digest is not None else native.sources_digest(str(root)), "files": names,
        **native.interpreter(), **stamp})
    (where / native.STAMP).write_text(body)
    return where


def test_a_build_of_the_current_sources_for_this_python_is_chosen(tmp_path: Path) -> None:
    copy_sources(tmp_path)
    where = write_build(tmp_path)
    choice = native.choose(str(tmp_path), {})
    assert choice == native.Choice(True, "compiled with mypyc", str(where))


def _edit(root: Path, module: str = "replay.replica.schedule") -> None:
    path = Path(native.source_path(str(root), module))
    path.write_text(path.read_text() + "\n# edited\n")


CASES: list[tuple[str, Any, str]] = [
    ("no build", None, "no compiled build: run `make native`"),
    ("switched off", "switch", "pure Python (HETPOOL_COMPILED=0)"),
    ("a compiled source edited since", "edit", "the compiled build is of older sources: run `make native`"),
    ("built for another Python", {"python": "3.11.0rc1"}, "the compiled build is for Python 3.11.0rc1"),
    ("built for another interpreter", {"implementation": "pypy311"}, "pypy311"),
    ("another digest", {"digest": "0" * 64}, "of older sources"),
    ("broken stamp", {"text": "{not json"}, "unreadable build stamp"),
    ("stamp without files", {"text": json.dumps({"digest": "x"})}, "unreadable build stamp"),
    ("a module missing", {"files": [native.module_file("replay.book")]}, "lacks some of its files"),
]


@pytest.mark.parametrize(("case", "setup", "reason"), CASES, ids=[c[0] for c in CASES])
def test_any_doubt_about_the_build_runs_the_pure_python_and_says_why(tmp_path: Path, case: str, setup: Any,
                                                                     reason: str) -> None:
    copy_sources(tmp_path)
    environ = {}
    if setup == "switch":
        write_build(tmp_path)
        environ = {native.SWITCH: "0"}
    elif setup == "edit":
        write_build(tmp_path)
        _edit(tmp_path)
    elif isinstance(setup, dict):
        write_build(tmp_path, **setup)
    choice = native.choose(str(tmp_path), environ)
    assert not choice.compiled and choice.where == ""
    assert choice.reason.startswith("pure Python (") and reason in choice.reason


def test_a_policy_module_added_beside_the_compiled_ones_leaves_the_build_valid(tmp_path: Path) -> None:
    """The compiled modules are a fixed list: a new policy runs as plain Python beside them."""
    copy_sources(tmp_path)
    write_build(tmp_path)
    (tmp_path / "replay" / "policies" / "newest.py").write_text("POLICY = None\n")
    assert native.choose(str(tmp_path), {}).compiled
    _edit(tmp_path, "replay.policies.sla_cost")
    assert not native.choose(str(tmp_path), {}).compiled


def test_extend_puts_the_build_first_only_on_the_packages_it_holds() -> None:
    with pytest.raises(ValueError, match="holds no compiled module"):
        native.extend([], "replay.planner")
    assert set(native.PACKAGES) == {"replay", "replay.replica", "replay.policies"}


# Imports the whole replay, runs one replay with a policy defined right here in plain Python (registered by name,
# building on the compiled base router), and reports what runs and whether the import machinery changed.
PLUGIN = r"""
import json, sys
meta, path, hooks = list(sys.meta_path), list(sys.path), list(sys.path_hooks)
import polars as pl
import replay
from replay import Candidate, native, run_replay
from replay.policies import POLICIES, get_policy, register
from replay.policies.base import ArrivalPolicy
from tests.replay_fleets import fleet, pool
from tests.test_plugins import SiteLast  # a router written in plain Python, in a test module

policy = register(ArrivalPolicy("last_pool", SiteLast))
assert get_policy("last_pool") is policy and "last_pool" in POLICIES
reg = fleet(pool("cheap", cost=1.0), pool("dear", cost=9.0))
frame = pl.DataFrame({"arrival_ms": [0, 10, 20], "in_tokens": 100, "out_tokens": 10})
dear = run_replay(Candidate(name="c", policy="last_pool"), frame, reg, 0).requests["pool"].to_list()
cheap = run_replay(Candidate(name="c", policy="cost_min"), frame, reg, 0).requests["pool"].to_list()
import replay.replica.events as events
print(json.dumps({"status": native.status(), "events": events.__file__, "dear": dear, "cheap": cheap,
                  "meta": sys.meta_path == meta, "path": sys.path == path, "hooks": sys.path_hooks == hooks}))
"""


def _plugin(environ: dict[str, str]) -> dict[str, Any]:
    env = {**os.environ, "POLARS_MAX_THREADS": "1", **environ}
    done = subprocess.run([sys.executable, "-c", PLUGIN], capture_output=True, text=True, env=env, cwd=REPO,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    out: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return out


@pytest.mark.parametrize("mode", ["pure", "as built"])
def test_importing_replay_changes_no_import_machinery_and_a_plain_python_policy_runs(mode: str) -> None:
    got = _plugin({native.SWITCH: "0"} if mode == "pure" else {native.SWITCH: ""})
    assert got["meta"] and got["path"] and got["hooks"]  # no finder, no sys.path entry, no hook
    assert got["dear"] == ["dear"] * 3 and got["cheap"] == ["cheap"] * 3
    if mode == "pure":
        assert got["status"] == "pure Python (HETPOOL_COMPILED=0)" and got["events"].endswith(".py")
    elif got["status"].startswith("compiled"):
        assert got["events"].startswith(native.build_dir(str(REPO)))


def test_asking_for_the_build_without_one_is_an_error_not_a_silent_fallback(tmp_path: Path) -> None:
    copy_sources(tmp_path)
    choice = native.choose(str(tmp_path), {})
    assert native.required(choice, {}) == choice  # without the ask, the pure Python runs
    with pytest.raises(native.NativeBuildError, match=r"HETPOOL_COMPILED=1 asks for the compiled replay, but: "
                                                      r"pure Python \(no compiled build"):
        native.required(choice, {native.SWITCH: "1"})
    write_build(tmp_path)
    assert native.required(native.choose(str(tmp_path), {}), {native.SWITCH: "1"}).compiled


# Every policy, overload with preemption and rejection, noise, failures and throttling, the step terms, both
# schedules, asynchronous scheduling, images encoded apart and the closed loop: a digest of every per-request
# column and of the bench points, in one process per mode.
SCENARIOS = r"""
import dataclasses, hashlib, json, sys
sys.path.insert(0, sys.argv[1])
from benchmarks.bench_replay import shaped, six_pool_fleet, traffic, with_blocks
from replay import Candidate, SlaTier, closed_loop, native, run_replay
from replay.candidate import FaultSpec, PoolFaults, PoolOverride
from replay.fleet import resolve_pools
from replay.policies import POLICIES
from pool_registry import load_registry
from tests.test_bench import h100_pool
import polars as pl
reg = six_pool_fleet()
tier = {"standard": SlaTier(ttft_s=1.0, e2e_s=30.0)}
frame = traffic(6000, rate=150)
runs = [(Candidate(name=n, policy=n, sla_tiers=tier), frame, reg) for n in POLICIES if n != "pd_split"]
split = {"prefill": tuple(p.id for p in reg.pools[:3]), "decode": tuple(p.id for p in reg.pools[3:])}
runs.append((Candidate(name="split", policy="pd_split", policy_options=split, sla_tiers=tier), frame, reg))
runs.append((Candidate(name="terms", sla_tiers=tier, noise=0.1), frame, shaped(reg)))
first = {p.id: PoolOverride(schedule="prefill_first") for p in reg.pools}  # SGLang's schedule, every term on
runs.append((Candidate(name="prompts first", sla_tiers=tier, pools=first), frame, shaped(reg)))
ahead = {p.id: PoolOverride(async_scheduling=True) for p in reg.pools}  # each pass composed as the one before began
runs.append((Candidate(name="ahead", policy="sla_cost", sla_tiers=tier, pools=ahead), frame, reg))
small = {p.id: PoolOverride(replicas=1, max_concurrency=8, max_queue=20) for p in reg.pools}
runs.append((Candidate(name="overload", policy="least_loaded", overflow="reject", pools=small), traffic(4000, 900),
             reg))
faults = FaultSpec(repair_s=5.0, pools={p.id: PoolFaults(failures_per_device_hour=40.0, throttled_share=0.3,
    throttled_clock=0.6) for p in reg.pools})
runs.append((Candidate(name="faults", sla_tiers=tier, faults=faults), frame, reg))
tight = h100_pool(load_registry(sys.argv[1] + "/examples/fleet.yaml"), 2)  # KV outgrown: preemption
runs.append((Candidate(name="kv", policy="cost_min"), pl.DataFrame({"arrival_ms": [0] * 64, "in_tokens": 8192,
                                                                     "out_tokens": 256}), tight))
blocked = with_blocks(traffic(3000, rate=150), 512)  # prefix caches: every cache-reading router, failures, preemption
runs += [(Candidate(name="b" + n, policy=n, sla_tiers=tier), blocked, reg) for n in ("prefix_affinity", "cost_min",
                                                                                        "sla_cost")]
runs.append((Candidate(name="bfaults", policy="prefix_affinity", faults=faults), blocked, reg))
runs.append((Candidate(name="bkv", policy="prefix_affinity"), pl.DataFrame({
    "arrival_ms": [0] * 64, "in_tokens": 8192, "out_tokens": 256, "hash_ids": [[k % 3] + list(range(100, 115))
                                                                              for k in range(64)],
    "block_tokens": 512}), tight))
from tests.test_encode_stage import EPD, epd_fleet  # images encoded apart, with failures and a TTFT limit
vlm = epd_fleet(encoders=2, others=3)
images = pl.DataFrame({"arrival_ms": [k * 7 for k in range(1500)], "in_tokens": [200 + k % 900 for k in range(1500)],
                       "out_tokens": [1 + k % 60 for k in range(1500)], "images": [k % 4 for k in range(1500)]})
runs.append((dataclasses.replace(EPD, sla_tiers={"standard": SlaTier(ttft_s=0.5)}, faults=FaultSpec(
    repair_s=2.0, pools={p.id: PoolFaults(failures_per_device_hour=300.0) for p in vlm.pools})), images, vlm))
h, counts = hashlib.sha256(), []
for cand, fr, r in runs:
    out = run_replay(cand, fr, r, 3)
    counts.append((out.summary.served, out.summary.preempted, sum(out.summary.overflow.values())))
    h.update(out.requests.write_csv().encode())
    h.update(repr(sorted(dataclasses.asdict(out.summary).items())).encode())
spec = resolve_pools(reg, Candidate(name="b"))[0]
for c in (1, 2, 8, 32):
    h.update(repr(closed_loop(spec, c, 1024, 128, 64, range_ratio=0.5, seed=c)).encode())
    h.update(repr(closed_loop(dataclasses.replace(spec, async_scheduling=True), c, 1024, 128, 64)).encode())
print(json.dumps(counts))
print(native.status())
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


def test_the_compiled_replay_gives_the_pure_pythons_results_to_the_last_bit() -> None:
    """Skipped only off CI without a build: CI builds it strictly (make native with --strict), so there it runs."""
    pure_status, pure = _run({native.SWITCH: "0"})
    assert pure_status == "pure Python (HETPOOL_COMPILED=0)"
    status, digest = _run({native.SWITCH: "1" if os.environ.get("CI") else ""})
    if not status.startswith("compiled"):
        pytest.skip(f"no compiled build to compare ({status}); `make native` builds it")
    assert digest == pure


LOAD_FROM = r"""
import sys
sys.path.insert(0, sys.argv[1])
import replay, replay.replica.events, replay.simulator, replay.policies.sla_cost
print(replay.native.status())
for m in (replay.replica.events, replay.simulator, replay.policies.sla_cost):
    print(m.__file__)
"""


@pytest.mark.slow
def test_the_build_script_compiles_a_checkout_that_then_loads_its_own_build(tmp_path: Path) -> None:
    checkout = tmp_path / "checkout"
    shutil.copytree(REPO, checkout, ignore=shutil.ignore_patterns(".git", ".venv", ".native", "demo", "*.duckdb",
                                                                   "test-artifacts", "__pycache__", ".*_cache"))
    script = [sys.executable, str(checkout / "scripts" / "build_native.py"), "--strict"]
    built = subprocess.run(script, capture_output=True, text=True, timeout=600, check=False)
    assert built.returncode == 0, built.stderr[-3000:]
    assert "native: compiled replay.book" in built.stdout
    assert native.choose(str(checkout), {}).compiled
    again = subprocess.run(script, capture_output=True, text=True, timeout=600, check=False)
    assert "is up to date" in again.stdout
    done = subprocess.run([sys.executable, "-c", LOAD_FROM, str(checkout)], capture_output=True, text=True,
                          env={**os.environ, native.SWITCH: ""}, cwd=checkout, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    status, *files = done.stdout.strip().splitlines()[-4:]
    assert status == "compiled with mypyc"
    where = native.build_dir(str(checkout))
    assert all(f.startswith(where) for f in files), files
    _edit(checkout)  # and an edit makes it stale again
    assert "older sources" in native.choose(str(checkout), {}).reason
