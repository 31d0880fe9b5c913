"""The simulator for split policies: prefill at arrival, decode once the KV cache has moved.

Three kinds of event are merged in time order: arrivals (choose a prefill pool, take a slot), prefill ends
(choose a decode pool, start the KV transfer) and cache landings (take a decode slot). Handling every slot
claim in time order keeps each pool FCFS whichever stage uses it. On equal times, landings go first, then
prefill ends, then arrivals; ties within a kind go by request order.
"""

from __future__ import annotations

import heapq

import numpy as np

from replay import costmodel
from replay.plan import Plan
from replay.policies.base import State
from replay.policies.pd_split import PdSplit
from replay.simulator import DEGRADE, NONE, QUEUE, REJECT, UNFIT, Raw, reject_reason

LAND, PREFILL_END = 0, 1


def simulate_split(plan: Plan, policy: PdSplit, overflow_mode: str) -> Raw:
    """Run one replay of the plan with prefill and decode on different pools."""
    n = plan.n
    state = State(plan)
    pre_choose, dec_choose = policy.chooser(plan, state), policy.decode_chooser(plan, state)
    pre_order, _ = policy.stages(plan)
    heaps, waiting = state.heaps, state.waiting
    prefill, decode, arrival = plan.prefill_rows, plan.decode_rows, plan.arrival_list
    feasible = plan.feasible.T.tolist()
    pool, dpool = [-1] * n, [-1] * n
    s1, e1, s2, e2, land = [0.0] * n, [0.0] * n, [0.0] * n, [0.0] * n, [0.0] * n
    flags = [NONE] * n
    events: list[tuple[float, int, int]] = []

    def take(p: int, t: float, busy: float) -> float:
        h = heaps[p]
        f = h[0]
        start = f if f > t else t
        heapq.heapreplace(h, start + busy)
        if f > t:
            waiting[p].append(f)
        return start

    def handle(t: float, kind: int, i: int) -> None:
        if kind == PREFILL_END:
            d, met = dec_choose(i, pool[i], t, t - arrival[i])
            if d < 0:  # no decode pool serves this model: decode where the prefill ran
                d, met = pool[i], False
            if not met and flags[i] == NONE:
                flags[i] = QUEUE
            dpool[i] = d
            heapq.heappush(events, (t + policy.transfer_seconds(plan, i, pool[i], d), LAND, i))
        else:
            d = dpool[i]
            land[i] = t
            s2[i] = take(d, t, decode[d][i])
            e2[i] = s2[i] + decode[d][i]

    for i, t in enumerate(arrival):
        while events and events[0][0] <= t:
            handle(*heapq.heappop(events))
        p = pre_choose(i, t)
        if p < 0:
            ok = [q for q in pre_order if feasible[i][q]]
            if not ok:
                flags[i] = UNFIT
                continue
            if overflow_mode == "reject":
                flags[i] = REJECT
                continue
            flags[i] = DEGRADE if overflow_mode == "degrade" else QUEUE
            p = ok[0] if overflow_mode == "degrade" else min(
                ok, key=lambda q: max(heaps[q][0], t) + prefill[q][i])
        pool[i] = p
        s1[i] = take(p, t, prefill[p][i])
        e1[i] = s1[i] + prefill[p][i]
        heapq.heappush(events, (e1[i], PREFILL_END, i))
    while events:
        handle(*heapq.heappop(events))
    return _outcome(plan, policy, pool, dpool, s1, e1, s2, e2, land, flags)


def _outcome(plan: Plan, policy: PdSplit, pool_l: list[int], dpool_l: list[int], s1_l: list[float],
             e1_l: list[float], s2_l: list[float], e2_l: list[float], land_l: list[float],
             flags: list[int]) -> Raw:
    pool, dpool = np.array(pool_l, dtype=np.int64), np.array(dpool_l, dtype=np.int64)
    s1, e1, s2, e2, land = (np.array(x, dtype=np.float64) for x in (s1_l, e1_l, s2_l, e2_l, land_l))
    served = pool >= 0
    idx = np.arange(plan.n)
    p, d = np.where(served, pool, 0), np.where(served, dpool, 0)
    nan = np.full(plan.n, np.nan)
    rate = np.array([costmodel.slot_cost(1.0, q) for q in plan.pools])
    cost = np.where(served, plan.prefill[p, idx] * rate[p] + plan.decode[d, idx] * rate[d], nan) \
        if plan.n else nan
    wait = np.where(served, (s1 - plan.arrival) + (s2 - land), nan)
    ttft = np.where(served, e1 - plan.arrival, nan)
    e2e = np.where(served, e2 - plan.arrival, nan)
    flag = np.array(flags, dtype=np.int8)
    reasons = {int(i): reject_reason(plan, int(i), int(flag[i]), policy) for i in np.flatnonzero(~served)}
    return Raw(pool=pool, decode_pool=np.where(served, dpool, -1), wait=wait, ttft=ttft, e2e=e2e, cost=cost,
               flag=flag, reasons=reasons,
               busy=[(pool[served], s1[served], e1[served]), (dpool[served], s2[served], e2[served])])
