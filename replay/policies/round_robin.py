"""round_robin: take pools in turn, skipping those that cannot fit the request or have no queue room.

The rotation starts at a pool drawn from the run's RNG, so the seed decides it and nothing else does.
"""

from __future__ import annotations

from replay.plan import Plan
from replay.policies.base import Chooser, State, no_options


class RoundRobin:
    """Rotate over the fleet's pools."""

    name = "round_robin"
    sla_aware = False
    split = False
    tracks_inflight = False

    def check_options(self, options: dict[str, tuple[str, ...]]) -> list[str]:
        """No options."""
        return no_options(self.name, options)

    def chooser(self, plan: Plan, state: State) -> Chooser:
        """A rotating pointer over pool indices."""
        npools = len(plan.pools)
        orders, code = plan.orders, plan.code
        allowed = [frozenset(o) for o in orders]
        heaps, waiting, maxq = state.heaps, state.waiting, state.max_queue
        nxt = [int(plan.rng.integers(npools))]

        def choose(i: int, t: float) -> int:
            ok = allowed[code[i]]
            start = nxt[0]
            for k in range(npools):
                p = (start + k) % npools
                if p not in ok:
                    continue
                if heaps[p][0] > t:
                    q = waiting[p]
                    while q and q[0] <= t:
                        q.popleft()
                    if len(q) >= maxq[p]:
                        continue
                nxt[0] = (p + 1) % npools
                return p
            return -1

        return choose


POLICY = RoundRobin()
