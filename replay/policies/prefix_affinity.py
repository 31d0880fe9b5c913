"""prefix_affinity: the replica that holds most of the request's prefix, against how loaded it is (cache-aware routing,
as llm-d's prefix-cache scorer, Dynamo's KV router and SGLang's cache-aware router do).

Every replica in service of the request's feasible pools is scored

    prefix_weight x (prompt tokens its cache would reuse) / (prompt tokens)
      - load_weight x (sequences running and waiting there) / max_concurrency

and the best one with queue room wins (ties: the cheaper pool, then the lower index). The reuse is read from the
replica's cache as its KV events tell a gateway: only blocks of prefills already admitted, never a block of a request
that has not arrived. A request without blocks scores on load alone. Options (numbers, at least 0, not both 0):
`prefix_weight` (default 1) and `load_weight` (default 1): with the defaults, a replica holding the whole prefix wins
until it runs max_concurrency more sequences than the next.
"""

from __future__ import annotations

from replay.plan import Plan
from replay.policies.base import AtArrival, State
from replay.replica.estimates import Replica

WEIGHTS = {"prefix_weight": 1.0, "load_weight": 1.0}


class PrefixAffinity:
    """Cache-aware routing: matched prefix against load."""

    name = "prefix_affinity"
    sla_aware = False
    split = False

    def check_options(self, options: dict[str, tuple[str, ...]]) -> list[str]:
        """Only the two weights, each one number at least 0, not both 0."""
        problems = [f"policy 'prefix_affinity' has no option '{k}'; options: {', '.join(WEIGHTS)}"
                    for k in options if k not in WEIGHTS]
        values = []
        for key in WEIGHTS:
            if key not in options:
                continue
            given = options[key][0] if len(options[key]) == 1 else ""
            try:
                value = float(given)
            except ValueError:
                value = -1.0
            if not 0.0 <= value < float("inf"):
                problems.append(f"policy option {key} must be one number at least 0, got {given!r}")
            values.append(value)
        if not problems and values and all(v == 0.0 for v in values) and len(values) == len(WEIGHTS):
            problems.append("policy 'prefix_affinity' needs prefix_weight or load_weight above 0")
        return problems

    def router(self, plan: Plan, state: State, options: dict[str, tuple[str, ...]]) -> _Router:
        """The router for one run, with the candidate's weights."""
        weights = {k: float(options[k][0]) if k in options else v for k, v in WEIGHTS.items()}
        return _Router(plan, state, weights["prefix_weight"], weights["load_weight"])


class _Router(AtArrival):
    def __init__(self, plan: Plan, state: State, prefix_weight: float, load_weight: float) -> None:
        super().__init__(plan, state)
        self.prefix_weight, self.load_weight = prefix_weight, load_weight
        self.blocks: list[list[int]] = plan.blocks
        self.block_tokens: list[int] = plan.block_tokens
        self.ins: list[int] = plan.in_list

    def route(self, i: int, t: float) -> Replica | None:
        state = self.state
        ids = self.blocks[i] if self.blocks else []
        block = self.block_tokens[i] if ids else 0
        n = self.ins[i]
        per_token = self.prefix_weight / n if n > 0 else 0.0
        lw = self.load_weight
        best, best_score = None, float("-inf")
        for p in self.orders[self.code[i]]:
            for r in state.up[p]:
                hit = r.cache.hit(ids, block, n) if ids and r.cache is not None else 0
                score = per_token * hit - lw * (r.running + len(r.queue)) / r.max_concurrency
                if score > best_score and state.has_room(p, r, t):
                    best, best_score = r, score
        return best


POLICY = PrefixAffinity()
