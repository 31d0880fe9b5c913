"""least_loaded: the pool with the fewest outstanding requests (running plus waiting) per sequence slot.

Outstanding requests are counted live on every replica, like a router's in-flight count. Ties go to the
cheaper pool.
"""

from __future__ import annotations

from replay.plan import Plan
from replay.policies.base import AtArrival, State, no_options
from replay.replica import Replica


class LeastLoaded:
    """Join the pool with the lowest load = outstanding / slots."""

    name = "least_loaded"
    sla_aware = False
    split = False

    def check_options(self, options: dict[str, tuple[str, ...]]) -> list[str]:
        """No options."""
        return no_options(self.name, options)

    def router(self, plan: Plan, state: State, options: dict[str, tuple[str, ...]]) -> _Router:
        """Pick the lowest outstanding-per-slot load with queue room."""
        return _Router(plan, state)


class _Router(AtArrival):
    def __init__(self, plan: Plan, state: State) -> None:
        self.orders, self.code, self.state = plan.orders, plan.code, state

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


POLICY = LeastLoaded()
