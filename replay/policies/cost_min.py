"""cost_min: the cheapest pool that fits and has queue room; the SLA is not consulted."""

from __future__ import annotations

from replay.plan import Plan
from replay.policies.base import Chooser, State, no_options


class CostMin:
    """Cheapest statically feasible pool under its queue limit."""

    name = "cost_min"
    sla_aware = False
    split = False
    tracks_inflight = False

    def check_options(self, options: dict[str, tuple[str, ...]]) -> list[str]:
        """No options."""
        return no_options(self.name, options)

    def chooser(self, plan: Plan, state: State) -> Chooser:
        """Walk the request's pools cheapest first."""
        orders, code = plan.orders, plan.code
        heaps, waiting, maxq = state.heaps, state.waiting, state.max_queue

        def choose(i: int, t: float) -> int:
            for p in orders[code[i]]:
                if heaps[p][0] <= t:
                    return p
                q = waiting[p]
                while q and q[0] <= t:
                    q.popleft()
                if len(q) < maxq[p]:
                    return p
            return -1

        return choose


POLICY = CostMin()
