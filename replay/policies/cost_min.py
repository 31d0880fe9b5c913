"""cost_min: the cheapest pool that fits and has queue room; the SLA is not consulted.

Pools are ranked by what the request costs there at full batches (plan.orders). A request with prefix blocks costs
less where its prefix is cached: on each pool it is priced with the prompt tokens the replica it would join would
reuse (as that replica's KV events tell a gateway), its prefill's compute for them taken off, and the cheapest pool
so priced wins.
"""

from __future__ import annotations

from replay.costmodel import FullBatch, reuse_seconds
from replay.plan import Plan
from replay.policies.base import ArrivalPolicy, AtArrival, State
from replay.replica.estimates import Replica


class _Router(AtArrival):
    def __init__(self, plan: Plan, state: State) -> None:
        super().__init__(plan, state)
        self.plan = plan
        self.blocks: list[list[int]] = plan.blocks
        if plan.blocks:
            prices = FullBatch(plan.pools)
            self.spt: list[float] = prices.spt[:, 0].tolist()
            self.sctx: list[float] = prices.sctx[:, 0].tolist()
            self.rate: list[float] = prices.rate[:, 0].tolist()

    def route(self, i: int, t: float) -> Replica | None:
        state = self.state
        if self.blocks and self.blocks[i]:
            return self.cheapest_with_prefix(i, t)
        for p in self.orders[self.code[i]]:
            r = state.pick(p, t)
            if state.has_room(p, r, t):
                return r
        return None

    def cheapest_with_prefix(self, i: int, t: float) -> Replica | None:
        """The pool whose replica costs least for request i, with the prefix that replica would reuse."""
        state, plan = self.state, self.plan
        ids, block, n = self.blocks[i], plan.block_tokens[i], plan.in_list[i]
        best, least = None, float("inf")
        for p in self.orders[self.code[i]]:
            r = state.pick(p, t)
            if not state.has_room(p, r, t):
                continue
            c = r.cache.hit(ids, block, n) if r.cache is not None else 0
            cost = float(plan.rank_cost[p, i]) - reuse_seconds(float(n), float(c), self.spt[p], self.sctx[p]) * \
                self.rate[p]
            if cost < least:
                best, least = r, cost
        return best


POLICY = ArrivalPolicy("cost_min", _Router)
