"""least_loaded: the pool with the fewest outstanding requests per slot (running plus waiting).

Outstanding requests are the simulator's in-flight finish times per pool (State.inflight), like a router
counting in-flight requests. Ties go to the cheaper pool.
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
    tracks_inflight = True

    def check_options(self, options: dict[str, tuple[str, ...]]) -> list[str]:
        """No options."""
        return no_options(self.name, options)

    def chooser(self, plan: Plan, state: State) -> Chooser:
        """Pick the lowest outstanding-per-slot load with queue room."""
        orders, code = plan.orders, plan.code
        heaps, waiting, maxq = state.heaps, state.waiting, state.max_queue
        if state.inflight is None:
            raise ValueError("least_loaded needs a State built with track_inflight=True")
        inflight = state.inflight
        slots = [float(p.slots) for p in plan.pools]
        pop = heapq.heappop

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
            return best

        return choose


POLICY = LeastLoaded()
