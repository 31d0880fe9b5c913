"""least_loaded: the pool with the fewest outstanding requests (running plus waiting) per sequence slot.

Outstanding requests are counted live on every replica, like a router's in-flight count. Ties go to the
cheaper pool.
"""

from __future__ import annotations

from replay.policies.base import ArrivalPolicy, AtArrival
from replay.replica.estimates import Replica


class _Router(AtArrival):
    def route(self, i: int, t: float) -> Replica | None:
        state = self.state
        loads, slots = state.loads, state.slots
        best, best_load = None, float("inf")
        for p in self.orders[self.code[i]]:
            load = loads[p] / slots[p]
            if load >= best_load:
                continue
            r = state.pick(p, t)
            if state.has_room(p, r, t):
                best, best_load = r, load
        return best


POLICY = ArrivalPolicy("least_loaded", _Router)
