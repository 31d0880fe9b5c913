"""round_robin: take pools in turn, skipping those that cannot fit the request or have no queue room.

The rotation starts at a pool drawn from the run's RNG, so the seed decides it and nothing else does.
"""

from __future__ import annotations

from replay.plan import Plan
from replay.policies.base import ArrivalPolicy, AtArrival, State
from replay.replica.estimates import Replica


class _Router(AtArrival):
    def __init__(self, plan: Plan, state: State) -> None:
        self.npools = len(plan.pools)
        self.orders: list[tuple[int, ...]] = plan.orders
        self.allowed: list[frozenset[int]] = [frozenset(o) for o in self.orders]
        self.code: list[int] = plan.code
        self.state = state
        self.next = int(plan.rng.integers(self.npools))

    def route(self, i: int, t: float) -> Replica | None:
        c, allowed = self.code[i], self.allowed
        if c >= len(allowed):  # an order the predictor's later predictions added
            allowed += [frozenset(o) for o in self.orders[len(allowed):]]
        ok = allowed[c]
        state, npools, start = self.state, self.npools, self.next
        for k in range(npools):
            p = (start + k) % npools
            if p not in ok:
                continue
            r = state.pick(p, t)
            if not state.has_room(p, r, t):
                continue
            self.next = (p + 1) % npools
            return r
        return None


POLICY = ArrivalPolicy("round_robin", _Router)
