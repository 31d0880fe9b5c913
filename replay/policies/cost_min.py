"""cost_min: the cheapest pool that fits and has queue room; the SLA is not consulted."""

from __future__ import annotations

from replay.policies.base import ArrivalPolicy, AtArrival
from replay.replica.estimates import Replica


class _Router(AtArrival):
    def route(self, i: int, t: float) -> Replica | None:
        state = self.state
        for p in self.orders[self.code[i]]:
            r = state.pick(p, t)
            if state.has_room(p, r, t):
                return r
        return None


POLICY = ArrivalPolicy("cost_min", _Router)
