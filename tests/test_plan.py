"""The plan: per-request rankings for a predictor that learns during the run, ranked block by block."""

from __future__ import annotations

import numpy as np

from benchmarks.bench_replay import CANDIDATE, six_pool_fleet, traffic
from replay.engine import prepare_traffic
from replay.fleet import resolve_pools
from replay.plan import _cost_orders, _rank, build_plan
from replay.policies import get_policy
from replay.simulator import simulate


def test_every_block_is_ranked_at_the_predictions_the_run_made_for_it() -> None:
    """build_plan ranks only the first block of a learning predictor; the run ranks each later block when it
    predicts it, including blocks whose predictions came out as they started (the default, before enough
    completions). At the end every request's cost, feasibility and pool order are those of its prediction."""
    reg = six_pool_fleet()
    frame = prepare_traffic(traffic(20_000, rate=150))
    plan = build_plan(frame, resolve_pools(reg, CANDIDATE), CANDIDATE, np.random.default_rng(0))
    assert plan.predictor == "online" and plan.forecast is not None
    first = plan.forecast.next_block
    assert 0 < first < plan.n
    assert not plan.feasible[:, first:].any()  # not ranked yet
    simulate(plan, get_policy(CANDIDATE.policy), {}, CANDIDATE.overflow)
    cost, feasible, key = _rank(plan.in_tokens, plan.cached_tokens, plan.pred_out.astype(np.float64),
                                plan.max_tokens, plan.serves, plan.pools)
    np.testing.assert_array_equal(plan.feasible, feasible)
    np.testing.assert_allclose(plan.rank_cost, cost, rtol=1e-12)
    orders, code = _cost_orders(key, feasible)
    assert [plan.orders[c] for c in plan.code] == [orders[c] for c in code]
    assert plan.pred_list == plan.pred_out.tolist()
