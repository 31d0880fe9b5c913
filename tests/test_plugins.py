"""HETPOOL_PLUGINS: the operator's own modules register policies and predictors that candidates then name."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from app.exceptions import UsageError
from app.plugins import ENV, load_plugins
from replay.exceptions import ReplayError
from replay.policies import POLICIES, get_policy, register
from replay.policies.base import ArrivalPolicy, AtArrival
from replay.predictors import PREDICTORS
from replay.predictors import register as register_predictor

REPO = Path(__file__).resolve().parent.parent

class SiteLast(AtArrival):
    """A site's routing written in plain Python: the pool last in the cost order that has room."""

    def route(self, i: int, t: float) -> Any:
        for p in reversed(self.orders[self.code[i]]):
            r = self.state.pick(p, t)
            if self.state.has_room(p, r, t):
                return r
        return None


# a module of the site's own, as HETPOOL_PLUGINS names it: it registers the policy above
PLUGIN = """
from replay.policies import register
from replay.policies.base import ArrivalPolicy
from tests.test_plugins import SiteLast

register(ArrivalPolicy("site_last", SiteLast))
"""


def test_a_plugin_module_registers_a_policy_a_candidate_file_names(tmp_path: Path, fleet_db: Path) -> None:
    (tmp_path / "site_routing.py").write_text(PLUGIN)
    trace = tmp_path / "t.csv"
    trace.write_text("arrival_ms,in_tokens,out_tokens\n" + "".join(
        f"{1_735_689_600_000 + 500 * k},800,100\n" for k in range(40)))
    cand = tmp_path / "last.yaml"
    cand.write_text("policy: site_last\n")
    env = {**os.environ, ENV: "site_routing", "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO)]),
           "POLARS_MAX_THREADS": "1"}
    hetpool = [sys.executable, "-m", "app.cli", "--db", str(fleet_db)]
    assert subprocess.run([*hetpool, "ingest", "traffic", str(trace)], env=env, cwd=REPO, capture_output=True,
                          timeout=300, check=False).returncode == 0
    done = subprocess.run([*hetpool, "--json", "replay", "run", "--candidate", str(cand)], env=env, cwd=REPO,
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads(done.stdout)["candidate"]
    assert summary["policy"] == "site_last" and summary["served"] == 40
    without = subprocess.run([*hetpool, "replay", "run", "--candidate", str(cand)],
                             env={**env, ENV: ""}, cwd=REPO, capture_output=True, text=True, timeout=300, check=False)
    assert without.returncode == 2
    assert "unknown policy 'site_last'; known: round_robin" in without.stderr


def test_a_module_that_will_not_import_is_one_line() -> None:
    with pytest.raises(UsageError, match=r"HETPOOL_PLUGINS: cannot import 'no_such_site_module': "
                                         r"ModuleNotFoundError: No module named 'no_such_site_module'"):
        load_plugins({ENV: "json, no_such_site_module"})
    assert load_plugins({ENV: " json ,, "}) == ["json"]
    assert load_plugins({}) == []


def test_the_registries_refuse_what_is_not_a_policy_or_a_predictor() -> None:
    class Nameless:
        name = ""

    with pytest.raises(ReplayError, match="a policy needs a name, a non-empty string; got ''"):
        register(Nameless())  # type: ignore[arg-type]
    with pytest.raises(ReplayError, match=r"policy 'x' lacks sla_aware, split, check_options, router"):
        register(type("X", (), {"name": "x"})())  # type: ignore[arg-type]
    with pytest.raises(ReplayError, match="policy 'sla_cost' is registered already"):
        register(ArrivalPolicy("sla_cost", AtArrival))  # type: ignore[arg-type]
    assert register(POLICIES["cost_min"]) is get_policy("cost_min")  # the same object again is fine
    with pytest.raises(ReplayError, match=r"predictor 'p' lacks keys, required, causal"):
        register_predictor(type("P", (), {"name": "p"})())  # type: ignore[arg-type]
    assert "p" not in PREDICTORS and "x" not in POLICIES
