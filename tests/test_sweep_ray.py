"""The Ray executor of sweeps, on a local Ray cluster this module starts: the same table and front as processes."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest

from app.cli import main
from pool_registry import Registry
from replay import Candidate, ReplayError, SlaTier, expand, load_grid_text, run_sweep
from replay.sweep_ray import RAY_MISSING
from tests.conftest import REPO
from tests.replay_fleets import fleet, pool

pytestmark = pytest.mark.slow  # starts a Ray cluster


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[None]:
    """A two-CPU Ray cluster on this machine for the module; stopped at its end."""
    import ray

    ray.init(num_cpus=2, include_dashboard=False, logging_level="WARNING", log_to_driver=False)
    try:
        yield
    finally:
        ray.shutdown()


def test_ray_gives_the_same_table_and_front_as_processes(ray_cluster: None) -> None:
    reg = fleet(pool("cheap", cost=1.0), pool("dear", cost=3.0, replicas=8))
    traffic = pl.DataFrame({"arrival_ms": list(range(0, 40_000, 200)), "in_tokens": 500, "out_tokens": 100})
    grid = load_grid_text("parameters:\n  pools.cheap.replicas: [1, 2, 4]\n  policy: [sla_cost, cost_min]\n"
                          "  noise: [0, 0.2]\n", reg)
    points = expand(grid, Candidate(name="b", sla_tiers={"standard": SlaTier(e2e_s=1.5)}))
    seen: list[float] = []
    processes = run_sweep(points, traffic, reg, seed=3, workers=2)
    on_ray = run_sweep(points, traffic, reg, seed=3, workers=2, executor="ray", progress=lambda f, _: seen.append(f))
    assert on_ray.equals(processes)
    assert on_ray["pareto"].any() and not on_ray["pareto"].all()
    assert seen == sorted(seen) and seen[-1] == 1.0
    # the seed matters (noise draws replica speeds), so equality above is not a table of constants
    assert not run_sweep(points, traffic, reg, seed=4, executor="ray").equals(processes)


def _build_in_worker() -> tuple[str, str]:
    """What a Ray worker's replay runs: native.status() and the file its replica's events came from."""
    import replay
    import replay.replica.events

    return replay.native.status(), str(replay.replica.events.__file__)


def test_a_local_ray_worker_runs_the_build_the_driver_runs(ray_cluster: None) -> None:
    """Workers of a local cluster import this checkout's replay, so they load the same build (compiled when
    `make native` has built the current sources, as CI's does) and are as fast per point as process workers."""
    import ray

    import replay
    import replay.replica.events

    status, where = ray.get(ray.remote(_build_in_worker).remote())
    assert (status, where) == (replay.native.status(), str(replay.replica.events.__file__))


def test_cli_sweep_on_ray_prints_what_processes_print(ray_cluster: None, capsys: pytest.CaptureFixture[str],
                                                      fleet_db: Path, tmp_path: Path) -> None:
    trace = tmp_path / "t.csv"
    pl.DataFrame({"arrival_ms": [1_735_689_600_000 + 250 * k for k in range(400)], "in_tokens": 800,
                  "out_tokens": 120, "model": "llama-3.1-70b"}).write_csv(trace)
    argv = ["--db", str(fleet_db), "--json", "replay", "sweep", "--traffic", str(trace), "--candidate",
            str(REPO / "examples" / "candidates" / "sla_cost.yaml"), "--grid", str(REPO / "examples" / "grid.yaml")]
    assert main([*argv, "--workers", "2"]) == 0
    processes, _ = capsys.readouterr()
    assert main([*argv, "--executor", "ray"]) == 0
    on_ray, err = capsys.readouterr()
    assert json.loads(on_ray) == json.loads(processes)
    assert "on a Ray cluster" in err


def test_address_without_the_ray_executor_is_a_usage_error(capsys: pytest.CaptureFixture[str], fleet_db: Path) -> None:
    code = main(["--db", str(fleet_db), "replay", "sweep", "--candidate", "c.yaml", "--grid", "g.yaml",
                 "--address", "127.0.0.1:6379"])
    err = capsys.readouterr().err
    assert code == 2 and err.strip() == "hetpool: error: --address names a Ray cluster; pass --executor ray too"


def test_without_ray_installed_the_executor_says_how_to_get_it(monkeypatch: pytest.MonkeyPatch,
                                                               fleet: Registry) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray now raises ImportError
    traffic = pl.DataFrame({"arrival_ms": [0, 1000], "in_tokens": 100, "out_tokens": 10, "model": "llama-3.1-70b"})
    points = expand(load_grid_text("parameters:\n  policy: [sla_cost]\n", fleet), Candidate(name="b"))
    with pytest.raises(ReplayError) as exc:
        run_sweep(points, traffic, fleet, executor="ray")
    assert str(exc.value) == RAY_MISSING


def test_an_unknown_executor_is_named(fleet: Registry) -> None:
    traffic = pl.DataFrame({"arrival_ms": [0], "in_tokens": 100, "out_tokens": 10})
    with pytest.raises(ReplayError, match="unknown sweep executor 'dask'; known: process, ray"):
        run_sweep([], traffic, fleet, executor="dask")
