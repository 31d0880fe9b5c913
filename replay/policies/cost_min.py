"""cost_min: the cheapest pool that fits and has queue room; the SLA is not consulted."""

from __future__ import annotations

from replay.plan import Plan
from replay.policies.base import AtArrival, State, no_options
from replay.replica import Replica


class CostMin:
    """Cheapest statically feasible pool under its queue limit."""

    name = "cost_min"
    sla_aware = False
    split = False

    def check_options(self, options: dict[str, tuple[str, ...]]) -> list[str]:
        """No options."""
        return no_options(self.name, options)

    def router(self, plan: Plan, state: State, options: dict[str, tuple[str, ...]]) -> _Router:
        """Walk the request's pools cheapest first."""
        return _Router(plan, state)


class _Router(AtArrival):
    def __init__(self, plan: Plan, state: State) -> None:
        self.orders, self.code, self.state = plan.orders, plan.code, state

    def route(self, i: int, t: float) -> Replica | None:
        state = self.state
        for p in self.orders[self.code[i]]:
            r = state.pick(p, t)
            if state.has_room(p, r, t):
                return r
        return None


POLICY = CostMin()
