"""pd_split: prefill on one pool, decode on another, with the KV cache moved over the interconnect between.

Options: `prefill: [pool ids]` and `decode: [pool ids]`. At arrival the request goes to the cheapest prefill
pool predicted to meet its TTFT limit (prefill cost ranks the same for every request: it is uncached tokens x
a per-pool rate). When prefill ends, the request is given the cheapest decode pool serving the same model
that is predicted (transfer, then the wait for a slot once the cache has landed, then decode) to meet the e2e
limit; if none is, the one that would finish first. The transfer takes in_tokens x KV bytes per token over the
slower side's interconnect (devices of a replica send their shards in parallel). The prefill slot is free as
soon as prefill ends, the decode slot is taken when the cache has landed, and the transfer itself is not
charged. Both pools must fit the request's whole context.
"""

from __future__ import annotations

from collections.abc import Callable

from replay import costmodel
from replay.errors import ReplayError
from replay.plan import Plan
from replay.policies.base import Chooser, State

DecodeChooser = Callable[[int, int, float, float], tuple[int, bool]]


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
    tracks_inflight = False

    def __init__(self) -> None:
        self.prefill_ids: tuple[str, ...] = ()
        self.decode_ids: tuple[str, ...] = ()

    def check_options(self, options: dict[str, tuple[str, ...]]) -> list[str]:
        """Both stage lists are required and non-empty."""
        return [f"policy 'pd_split' needs a non-empty '{k}' list of pool ids"
                for k in ("prefill", "decode") if not options.get(k)]

    def configure(self, options: dict[str, tuple[str, ...]]) -> PdSplit:
        """A copy bound to a candidate's stage lists."""
        bound = PdSplit()
        bound.prefill_ids, bound.decode_ids = options.get("prefill", ()), options.get("decode", ())
        return bound

    def stages(self, plan: Plan) -> tuple[list[int], list[int]]:
        """Prefill and decode pool indices, each sorted by its stage's cost rate (cheapest first)."""
        pre = _indices(plan, self.prefill_ids, "prefill")
        dec = _indices(plan, self.decode_ids, "decode")
        pools = plan.pools
        pre.sort(key=lambda k: pools[k].model.active_params_b * pools[k].replica_cost_per_s
                 / pools[k].replica_flops / pools[k].max_concurrency)
        dec.sort(key=lambda k: pools[k].model.active_params_b * pools[k].model.bytes_per_param
                 * pools[k].replica_cost_per_s / pools[k].replica_bytes_per_s / pools[k].max_concurrency)
        return pre, dec

    def chooser(self, plan: Plan, state: State) -> Chooser:
        """The prefill-stage decision at arrival."""
        pre, _ = self.stages(plan)
        feasible = plan.feasible.T.tolist()
        slack, heaps, waiting, maxq = plan.ttft_slack_rows, state.heaps, state.waiting, state.max_queue

        def choose(i: int, t: float) -> int:
            ok = feasible[i]
            for p in pre:
                if not ok[p]:
                    continue
                f = heaps[p][0]
                w = f - t if f > t else 0.0
                if w > slack[p][i]:
                    continue
                if w > 0.0:
                    q = waiting[p]
                    while q and q[0] <= t:
                        q.popleft()
                    if len(q) >= maxq[p]:
                        continue
                return p
            return -1

        return choose

    def decode_chooser(self, plan: Plan, state: State) -> DecodeChooser:
        """The decode-stage decision at prefill end: (i, prefill pool, now, elapsed) -> (pool, meets SLA).

        For each decode pool the predicted finish counts the KV transfer from the prefill pool, the wait
        for a slot once the cache has landed, and the decode itself.
        """
        _, dec = self.stages(plan)
        pools = plan.pools
        feasible = plan.feasible.T.tolist()
        decode, e2e_limit, in_tokens = plan.decode_rows, plan.e2e_limit.tolist(), plan.in_tokens.tolist()
        rate = [[costmodel.kv_transfer_seconds(1.0, a, b) for b in pools] for a in pools]
        same_model = [[a.model.id == b.model.id for b in pools] for a in pools]
        heaps, waiting, maxq = state.heaps, state.waiting, state.max_queue

        def choose(i: int, p: int, t: float, elapsed: float) -> tuple[int, bool]:
            ok = feasible[i]
            fallback, soonest = -1, float("inf")
            for d in dec:
                if not (ok[d] and same_model[p][d]):
                    continue
                r = t + in_tokens[i] * rate[p][d]
                f = heaps[d][0]
                w = f - r if f > r else 0.0
                finish = (r - t) + w + decode[d][i]
                if finish < soonest:
                    fallback, soonest = d, finish
                if elapsed + finish > e2e_limit[i]:
                    continue
                if w > 0.0:
                    q = waiting[d]
                    while q and q[0] <= t:
                        q.popleft()
                    if len(q) >= maxq[d]:
                        continue
                return d, True
            return fallback, False

        return choose

    def transfer_seconds(self, plan: Plan, i: int, p: int, d: int) -> float:
        """KV transfer time of request i from prefill pool p to decode pool d."""
        return float(costmodel.kv_transfer_seconds(float(plan.in_tokens[i]), plan.pools[p], plan.pools[d]))


POLICY = PdSplit()
