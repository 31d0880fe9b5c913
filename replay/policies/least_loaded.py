"""least_loaded: the pool with the fewest outstanding requests per slot (running plus waiting).

Outstanding requests are tracked by their FCFS finish times, which the policy can predict exactly from the
slot heaps, like a router counting in-flight requests. Ties go to the cheaper pool.
"""

from __future__ import annotations

import heapq

from replay.plan import Plan
from replay.policies.base import Chooser, State, no_options


class LeastLoaded:
    """Join the pool with the lowest load = outstanding / slots."""

    name = "least_loaded"
    sla_aware = False
    split = False

    def check_options(self, options: dict[str, tuple[str, ...]]) -> list[str]:
        """No options."""
        return no_options(self.name, options)

    def chooser(self, plan: Plan, state: State) -> Chooser:
        """Keep a finish-time heap per pool; pick the lowest load with queue room."""
        orders, code, svc = plan.orders, plan.code, plan.service_rows
        heaps, waiting, maxq = state.heaps, state.waiting, state.max_queue
        slots = [float(p.slots) for p in plan.pools]
        inflight: list[list[float]] = [[] for _ in plan.pools]
        pop, push = heapq.heappop, heapq.heappush

        def choose(i: int, t: float) -> int:
            best, best_load = -1, float("inf")
            for p in orders[code[i]]:
                h = inflight[p]
                while h and h[0] <= t:
                    pop(h)
                load = len(h) / slots[p]
                if load >= best_load:
                    continue
                if heaps[p][0] > t:
                    q = waiting[p]
                    while q and q[0] <= t:
                        q.popleft()
                    if len(q) >= maxq[p]:
                        continue
                best, best_load = p, load
            if best >= 0:
                f = heaps[best][0]
                push(inflight[best], (f if f > t else t) + svc[best][i])
            return best

        return choose


POLICY = LeastLoaded()
