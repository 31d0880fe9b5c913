"""The discrete-event simulator: FCFS pools of replicas x max_concurrency slots, routing at arrival.

Events are arrivals (in time order) and slot completions (each pool's min-heap of slot free times). With
FCFS and arrivals handled in order, a request routed to pool p at time t starts at max(t, earliest free slot)
and takes that slot until start + service: one heap operation per request, which is exact for a multi-server
FCFS queue. Requests no pool can take follow the candidate's overflow rule and are never dropped silently.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from replay.constraints import why_not
from replay.plan import Plan
from replay.policies.base import Policy, State

NONE, QUEUE, DEGRADE, REJECT, UNFIT = 0, 1, 2, 3, 4
FLAG_NAMES = ("", "queue", "degrade", "reject", "reject")
INF = float("inf")


@dataclass
class Raw:
    """Per-request outcome arrays of one simulation, in plan order."""

    pool: np.ndarray             # int, -1 when rejected
    decode_pool: np.ndarray      # int, the pool that decoded (same as pool unless split)
    wait: np.ndarray             # seconds queued (both stages when split), nan when rejected
    ttft: np.ndarray
    e2e: np.ndarray
    cost: np.ndarray
    flag: np.ndarray             # NONE, QUEUE, DEGRADE, REJECT, UNFIT
    reasons: dict[int, str] = field(default_factory=dict)
    busy: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = field(default_factory=list)  # (pool, start, end)


def overflow_rule(plan: Plan, state: State, mode: str) -> Callable[[int, float], tuple[int, int]]:
    """The function applied when the policy finds no pool: (i, t) -> (pool or -1, flag)."""
    orders, code, svc, heaps = plan.orders, plan.code, plan.service_rows, state.heaps

    def overflow(i: int, t: float) -> tuple[int, int]:
        order = orders[code[i]]
        if not order:
            return -1, UNFIT
        if mode == "reject":
            return -1, REJECT
        if mode == "degrade":
            return order[0], DEGRADE
        best, soonest = -1, INF
        for p in order:  # the pool that would finish the request first
            f = heaps[p][0]
            end = (f if f > t else t) + svc[p][i]
            if end < soonest:
                best, soonest = p, end
        return best, QUEUE

    return overflow


def reject_reason(plan: Plan, i: int, flag: int, policy: Policy) -> str:
    """Why request i was not served."""
    if flag == UNFIT:
        return why_not(str(plan.models[i]), int(plan.in_tokens[i] + plan.out_tokens[i]), plan.pools)
    what = "the SLA and queue limits" if policy.sla_aware else "the queue limits"
    return f"overflow: no pool met {what} of policy {policy.name}"


def simulate(plan: Plan, policy: Policy, overflow_mode: str) -> Raw:
    """Run one replay of the plan under a policy that routes at arrival."""
    n = plan.n
    state = State(plan, track_inflight=policy.tracks_inflight)
    choose = policy.chooser(plan, state)
    overflow = overflow_rule(plan, state, overflow_mode)
    svc, heaps, waiting, inflight = plan.service_rows, state.heaps, state.waiting, state.inflight
    pool_out = [-1] * n
    start_out = [0.0] * n
    flags = [NONE] * n
    replace, push = heapq.heapreplace, heapq.heappush
    for i, t in enumerate(plan.arrival_list):
        p = choose(i, t)
        if p < 0:
            p, flags[i] = overflow(i, t)
            if p < 0:
                continue
        h = heaps[p]
        f = h[0]
        if f > t:
            end = f + svc[p][i]
            waiting[p].append(f)
            start_out[i] = f
        else:
            end = t + svc[p][i]
            start_out[i] = t
        replace(h, end)
        if inflight is not None:
            push(inflight[p], end)
        pool_out[i] = p
    return _outcome(plan, policy, np.array(pool_out, dtype=np.int64), np.array(start_out),
                    np.array(flags, dtype=np.int8))


def _outcome(plan: Plan, policy: Policy, pool: np.ndarray, start: np.ndarray, flag: np.ndarray) -> Raw:
    served = pool >= 0
    idx = np.arange(plan.n)
    sel = np.where(served, pool, 0)
    nan = np.full(plan.n, np.nan)
    wait = np.where(served, start - plan.arrival, nan)
    service = plan.service[sel, idx] if plan.n else nan
    ttft = wait + (plan.prefill[sel, idx] if plan.n else nan)
    e2e = wait + service
    cost = np.where(served, plan.cost[sel, idx] if plan.n else nan, nan)
    reasons = {int(i): reject_reason(plan, int(i), int(flag[i]), policy) for i in np.flatnonzero(~served)}
    return Raw(pool=pool, decode_pool=pool.copy(), wait=wait, ttft=ttft, e2e=e2e, cost=cost, flag=flag,
               reasons=reasons, busy=[(pool[served], start[served], (start + service)[served])])
