"""sla_cost: the cheapest pool predicted to meet the request's SLA tier, under its queue limit (the seed's rule).

For each pool, cheapest first, the request's replica is picked and its TTFT and e2e are predicted from that
replica's live batch, KV use and queue (Replica.predict); the first pool where both are within the tier wins.
"""

from __future__ import annotations

from replay.plan import Plan
from replay.policies.base import AtArrival, State, no_options
from replay.replica import Replica


class SlaCost:
    """Cheapest pool predicted to meet the SLA, under its queue limit."""

    name = "sla_cost"
    sla_aware = True
    split = False

    def check_options(self, options: dict[str, tuple[str, ...]]) -> list[str]:
        """No options."""
        return no_options(self.name, options)

    def router(self, plan: Plan, state: State, options: dict[str, tuple[str, ...]]) -> _Router:
        """Walk the request's pools cheapest first; take the first that meets the SLA and has room."""
        return _Router(plan, state)


class _Router(AtArrival):
    def __init__(self, plan: Plan, state: State) -> None:
        self.orders, self.code, self.state = plan.orders, plan.code, state
        self.ttft, self.e2e = plan.ttft_list, plan.e2e_list

    def route(self, i: int, t: float) -> Replica | None:
        state = self.state
        ttft_limit, e2e_limit = self.ttft[i], self.e2e[i]
        for p in self.orders[self.code[i]]:
            r = state.pick(p, t)
            ttft, e2e = r.predict(i, t)
            if ttft <= ttft_limit and e2e <= e2e_limit and state.has_room(p, r, t):
                return r
        return None


POLICY = SlaCost()
