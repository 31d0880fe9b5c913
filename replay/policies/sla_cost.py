"""sla_cost: the cheapest pool that meets every hard constraint, including the predicted SLA (the seed's rule).

Predicted TTFT = current FCFS wait + prefill, predicted e2e = wait + prefill + decode; both must be within the
request's tier. The plan holds slack = min(ttft_limit - prefill, e2e_limit - service), so the check is one
comparison of the predicted wait against it.
"""

from __future__ import annotations

from replay.plan import Plan
from replay.policies.base import Chooser, State, no_options


class SlaCost:
    """Cheapest pool predicted to meet the SLA, under its queue limit."""

    name = "sla_cost"
    sla_aware = True
    split = False
    tracks_inflight = False

    def check_options(self, options: dict[str, tuple[str, ...]]) -> list[str]:
        """No options."""
        return no_options(self.name, options)

    def chooser(self, plan: Plan, state: State) -> Chooser:
        """Walk the request's pools cheapest first; take the first that meets the SLA and has room."""
        orders, code, slack = plan.orders, plan.code, plan.slack_rows
        heaps, waiting, maxq = state.heaps, state.waiting, state.max_queue

        def choose(i: int, t: float) -> int:
            for p in orders[code[i]]:
                f = heaps[p][0]
                if f <= t:
                    if slack[p][i] >= 0.0:
                        return p
                elif f - t <= slack[p][i]:
                    q = waiting[p]
                    while q and q[0] <= t:
                        q.popleft()
                    if len(q) < maxq[p]:
                        return p
            return -1

        return choose


POLICY = SlaCost()
