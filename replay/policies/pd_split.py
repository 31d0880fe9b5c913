"""pd_split: prefill on one pool, decode on another, with the KV cache moved over the interconnect between.

Options: `prefill: [pool ids]` and `decode: [pool ids]`, each tried cheapest first (by the request's cost at
full batches, costmodel.full_batch_cost). At arrival the request goes to the first prefill pool predicted to
meet its TTFT limit. When its prefill ends (the first token is out), it is given the first decode pool serving
the same model that is predicted (transfer, then its decode on the replica it would join) to meet the e2e
limit; if none is, the one predicted to finish first. The transfer takes in_tokens x KV bytes per token over
the slower side's interconnect (devices of a replica send their shards in parallel). The prefill replica
frees the sequence when its prefill ends; the decode replica admits it, with its KV cache and no prompt to
compute, once the cache has landed. Both pools must fit the request's whole context. A request whose model no
prefill pool serves is served whole, at arrival, on the cheapest pool that serves it and has queue room.
"""

from __future__ import annotations

from replay import costmodel
from replay.exceptions import ReplayError
from replay.plan import Plan
from replay.policies.base import State
from replay.replica.estimates import Replica


def _indices(plan: Plan, ids: tuple[str, ...], role: str) -> list[int]:
    index = {p.id: k for k, p in enumerate(plan.pools)}
    missing = [i for i in ids if i not in index]
    if missing:
        raise ReplayError(f"pd_split {role} pool {', '.join(repr(m) for m in missing)} is disabled or does "
                          f"not serve; serving: {', '.join(index)}")
    return [index[i] for i in ids]


class PdSplit:
    """Disaggregated prefill and decode across pools."""

    name = "pd_split"
    sla_aware = True
    split = True

    def check_options(self, options: dict[str, tuple[str, ...]]) -> list[str]:
        """Both stage lists are required and non-empty, and nothing else is taken."""
        unknown = [f"policy 'pd_split' has no option '{k}'; options: prefill, decode"
                   for k in options if k not in ("prefill", "decode")]
        return unknown + [f"policy 'pd_split' needs a non-empty '{k}' list of pool ids"
                          for k in ("prefill", "decode") if not options.get(k)]

    def router(self, plan: Plan, state: State, options: dict[str, tuple[str, ...]]) -> _Router:
        """Bind the stage lists to the run's pools."""
        return _Router(plan, state, _indices(plan, options.get("prefill", ()), "prefill"),
                       _indices(plan, options.get("decode", ()), "decode"))


class _Router:
    def __init__(self, plan: Plan, state: State, prefill: list[int], decode: list[int]) -> None:
        self.state, self.plan = state, plan
        self.prefill, self.decode = prefill, decode
        self.feasible = plan.feasible_rows
        self.ttft, self.e2e = plan.ttft_list, plan.e2e_list
        self.cost = plan.rank_cost
        pools = plan.pools
        self.rate = [[costmodel.kv_transfer_seconds(1.0, a, b) for b in pools] for a in pools]
        self.same_model = [[a.model.id == b.model.id for b in pools] for a in pools]
        self.in_tokens = plan.in_list

    def splits(self, p: int) -> bool:
        return p in self.prefill

    def route(self, i: int, t: float) -> Replica | None:
        state, ok = self.state, self.feasible[i]
        if not any(ok[p] for p in self.prefill):
            for p in self.plan.orders[self.plan.code[i]]:
                r = state.pick(p, t)
                if state.has_room(p, r, t):
                    return r
            return None
        for p in sorted(self.prefill, key=lambda q: self.cost[q, i]):
            if not ok[p]:
                continue
            r = state.pick(p, t)
            ttft, _ = r.predict(i, t)
            if ttft <= self.ttft[i] and state.has_room(p, r, t):
                return r
        return None

    def decode_pool(self, i: int, p: int, t: float) -> tuple[int, bool]:
        state, ok = self.state, self.feasible[i]
        elapsed = t - float(self.plan.arrival[i])
        fallback, soonest = -1, float("inf")
        for d in sorted(self.decode, key=lambda q: self.cost[q, i]):
            if not (ok[d] and self.same_model[p][d]):
                continue
            transfer = self.in_tokens[i] * self.rate[p][d]
            r = state.pick(d, t + transfer)
            _, e2e = r.predict(i, t + transfer)
            finish = transfer + e2e
            if finish < soonest:
                fallback, soonest = d, finish
            if elapsed + finish <= self.e2e[i] and state.has_room(d, r, t):
                return d, True
        return fallback, False

    def transfer_seconds(self, i: int, p: int, d: int) -> float:
        """KV transfer time of request i from prefill pool p to decode pool d."""
        return self.in_tokens[i] * self.rate[p][d]


POLICY = PdSplit()
