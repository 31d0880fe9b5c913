"""Sweeps: grid files, expansion, the Pareto front, and parallel runs equal to serial ones."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import polars as pl
import pytest

from pool_registry import Registry
from replay import (
    Candidate,
    GridError,
    SlaTier,
    expand,
    load_grid,
    load_grid_text,
    pareto_front,
    run_replay,
    run_sweep,
)
from tests.conftest import REPO
from tests.replay_fleets import fleet, pool


def test_example_grid_loads(fleet: Registry) -> None:
    grid = load_grid(REPO / "examples" / "grid.yaml", fleet)
    assert grid.size == len(expand(grid, Candidate(name="b"))) > 1


@pytest.mark.parametrize(("text", "expected"), [
    ("parameters:\n  policy: [sla_cost, lor2]\n",
     "g.yaml:2: parameters.policy[1]: unknown policy 'lor2'; known: round_robin"),
    ("parameters:\n  pools.h200-a.replicas: [1]\n",
     "g.yaml:2: parameters.pools.h200-a.replicas: unknown pool 'h200-a'"),
    ("parameters:\n  pools.h100-a.gpus: [1]\n", "g.yaml:2: parameters.pools.h100-a.gpus: unknown field 'gpus'"),
    ("parameters:\n  pools.h100-a.replicas: [0, 2]\n", "g.yaml:2: parameters.pools.h100-a.replicas[0]: must be >= 1"),
    ("parameters:\n  pools.h100-a.mfu: [0.5, 1.5]\n", "g.yaml:2: parameters.pools.h100-a.mfu[1]: must be <= 1"),
    ("parameters:\n  temperature: [1]\n", "g.yaml:2: parameters.temperature: unknown parameter 'temperature'"),
    ("parameters:\n  policy: sla_cost\n", "g.yaml:2: parameters.policy: expected a list"),
    ("parameters: {}\n", "g.yaml:1: parameters: expected at least one parameter"),
    ("params: {}\n", "g.yaml:1: params: unknown key 'params'"),
])
def test_bad_grids(fleet: Registry, text: str, expected: str) -> None:
    with pytest.raises(GridError) as exc:
        load_grid_text(text, fleet, "g.yaml")
    assert any(str(p).startswith(expected) for p in exc.value.problems), [str(p) for p in exc.value.problems]


def test_expansion_is_the_cartesian_product(fleet: Registry) -> None:
    grid = load_grid_text("parameters:\n  policy: [sla_cost, cost_min]\n  pools.h100-a.replicas: [4, 8, 12]\n"
                          "  pools.h100-a.mfu: [0.4, 0.5]\n", fleet)
    points = expand(grid, Candidate(name="base"))
    assert len(points) == 12
    settings, cand = points[-1]
    assert settings == {"policy": "cost_min", "pools.h100-a.replicas": 12, "pools.h100-a.mfu": 0.5}
    assert (cand.policy, cand.pools["h100-a"].replicas, cand.pools["h100-a"].mfu) == ("cost_min", 12, 0.5)
    assert cand.name == "base[policy=cost_min,pools.h100-a.replicas=12,pools.h100-a.mfu=0.5]"


def test_pareto_front_by_hand() -> None:
    cost = [1.0, 2.0, 3.0, 2.0, 1.0, 5.0]
    p99 = [9.0, 4.0, 1.0, 5.0, 9.0, None]
    # (2, 5) is beaten by (2, 4); the two (1, 9) points tie and neither beats the other; None never counts.
    assert pareto_front(cost, p99) == [True, True, True, False, True, False]
    # With provisioned cost as a third measure, a point dearer to keep up no longer beats a cheaper one.
    assert pareto_front([1.0, 1.0], [2.0, 3.0], [20.0, 10.0]) == [True, True]
    assert pareto_front([1.0, 1.0], [2.0, 3.0], [10.0, 10.0]) == [True, False]


def test_parallel_sweep_equals_serial_sweep() -> None:
    reg = fleet(pool("cheap", cost=1.0), pool("dear", cost=3.0, replicas=8))
    traffic = pl.DataFrame({"arrival_ms": list(range(0, 40_000, 200)), "in_tokens": 500, "out_tokens": 100})
    grid = load_grid_text("parameters:\n  pools.cheap.replicas: [1, 2, 4]\n  policy: [sla_cost, cost_min]\n", reg)
    base = Candidate(name="b", sla_tiers={"standard": SlaTier(e2e_s=1.5)})
    points = expand(grid, base)
    serial = run_sweep(points, traffic, reg, seed=0, workers=1)
    parallel = run_sweep(points, traffic, reg, seed=0, workers=2)
    assert serial.equals(parallel)
    assert serial.height == 6 and serial["pareto"].any()
    # More cheap replicas never cost more under sla_cost: less spill to the dear pool.
    costs = serial.filter(pl.col("policy") == "sla_cost").sort("pools.cheap.replicas")["busy_cost_usd"].to_list()
    assert costs == sorted(costs, reverse=True)


@pytest.mark.slow  # spawns two worker processes
def test_a_sweep_point_replays_with_the_history_and_the_faults_a_run_uses() -> None:
    reg = fleet(pool("cheap", cost=1.0, replicas=2), pool("dear", cost=3.0, replicas=4))
    traffic = pl.DataFrame({"arrival_ms": list(range(0, 60_000, 100)), "in_tokens": 200,
                            "out_tokens": [50 + 37 * (k % 11) for k in range(600)]})
    history = pl.DataFrame({"in_tokens": [200] * 50, "out_tokens": [400] * 50, "model": ["m"] * 50,
                            "sla_tier": ["standard"] * 50})
    telemetry = pl.DataFrame({"pool": ["cheap"], "hours": [48], "device_hours": [96.0], "fatal_events": [0.0],
                              "devices_lost": [0], "busy_minutes": [100], "throttled_minutes": [60],
                              "throttled_clock": [0.5]})
    grid = load_grid_text("parameters:\n  policy: [sla_cost, cost_min]\n", reg)
    base = Candidate(name="b", sla_tiers={"standard": SlaTier(e2e_s=3.0)})
    points = expand(grid, base)
    table = run_sweep(points, traffic, reg, seed=2, workers=2, history=history, telemetry=telemetry)
    for row, (_, cand) in zip(table.iter_rows(named=True), points, strict=True):
        alone = run_replay(cand, traffic, reg, 2, history, telemetry).summary
        assert (row["busy_cost_usd"], row["ttft_p99"]) == (alone.busy_cost_usd, alone.ttft_p99)
    plain = run_sweep(points, traffic, reg, seed=2)
    assert not plain["busy_cost_usd"].equals(table["busy_cost_usd"])  # the throttled pool and the history count


def test_a_parallel_sweep_from_a_page_script_does_not_run_the_page_again(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    # Under Streamlit the main module is the page script, by path and without a module spec; a spawned worker
    # that ran it again would fail here (as a console page run in a worker fails).
    page = tmp_path / "page.py"
    page.write_text("raise SystemExit('the page ran in a sweep worker')\n")
    fake = types.ModuleType("__main__")
    fake.__file__ = str(page)
    monkeypatch.setitem(sys.modules, "__main__", fake)
    reg = fleet(pool("cheap", cost=1.0), pool("dear", cost=3.0))
    traffic = pl.DataFrame({"arrival_ms": list(range(0, 4_000, 200)), "in_tokens": 500, "out_tokens": 100})
    points = expand(load_grid_text("parameters:\n  policy: [sla_cost, cost_min]\n", reg), Candidate(name="b"))
    assert run_sweep(points, traffic, reg, seed=0, workers=2).equals(run_sweep(points, traffic, reg, seed=0))
    assert sys.modules["__main__"] is fake  # put back once the pool is up
