"""observed: send each request where the trace says it was served (obs_pool, and obs_replica when given).

This replays the production router's decisions, so a calibrated model can be checked against what was
observed before it is trusted for what-ifs. A request with no observed pool, or one this candidate does not
run or cannot fit it, goes to overflow.
"""

from __future__ import annotations

from replay.plan import Plan
from replay.policies.base import ArrivalPolicy, AtArrival, State
from replay.replica.estimates import Replica


class _Router(AtArrival):
    def __init__(self, plan: Plan, state: State) -> None:
        self.pool: list[int] = plan.obs_pool.tolist()
        self.replica: list[int] = plan.obs_replica.tolist()
        self.feasible: list[list[bool]] = plan.feasible_rows
        self.state = state

    def route(self, i: int, t: float) -> Replica | None:
        p = self.pool[i]
        if p < 0 or not self.feasible[i][p]:
            return None
        r = self.replica[i]
        if r >= 0 and not self.state.replicas[p][r].down:
            return self.state.replicas[p][r]
        return self.state.pick(p, t)  # no replica observed, or the observed one has failed


POLICY = ArrivalPolicy("observed", _Router)
