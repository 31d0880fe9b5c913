"""What a routing policy is: given the precomputed plan and the live pool state, pick a pool per arrival.

A policy returns a chooser `choose(i, t) -> pool index`, or -1 when no pool satisfies its constraints
(the simulator then applies the candidate's overflow rule). Choosers only see pools that pass the static
hard constraints (model, memory, context: `plan.orders[plan.code[i]]`, cheapest first) and must respect
each pool's queue limit. SLA-aware policies also require the predicted TTFT and e2e to meet the tier.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Protocol

from replay.plan import Plan

Chooser = Callable[[int, float], int]


class State:
    """Live pool state the simulator owns and policies read.

    heaps[p] holds the time each slot of pool p becomes free (a min-heap, so heaps[p][0] is the earliest);
    waiting[p] holds the start times of requests still waiting, in FCFS order (start times on a pool
    never decrease, so entries <= now can be dropped from the left). When a policy asks for it, inflight[p]
    holds the finish times of every request routed to p (overflow included), like a router's in-flight count.
    """

    def __init__(self, plan: Plan, *, track_inflight: bool = False):
        self.heaps: list[list[float]] = [[0.0] * p.slots for p in plan.pools]
        self.waiting: list[deque[float]] = [deque() for _ in plan.pools]
        self.max_queue: list[int] = [p.max_queue for p in plan.pools]
        self.inflight: list[list[float]] | None = [[] for _ in plan.pools] if track_inflight else None

    def queue_length(self, p: int, t: float) -> int:
        """Requests waiting on pool p at time t."""
        q = self.waiting[p]
        while q and q[0] <= t:
            q.popleft()
        return len(q)

    def predicted_wait(self, p: int, t: float) -> float:
        """How long a request arriving now at pool p would wait for a slot (FCFS)."""
        f = self.heaps[p][0]
        return f - t if f > t else 0.0


class Policy(Protocol):
    """A routing policy that decides at arrival."""

    name: str
    sla_aware: bool
    split: bool
    tracks_inflight: bool

    def check_options(self, options: dict[str, tuple[str, ...]]) -> list[str]:
        """Problems with the candidate's policy options (empty when fine)."""
        ...

    def chooser(self, plan: Plan, state: State) -> Chooser:
        """The per-arrival decision function for one run."""
        ...


def no_options(name: str, options: dict[str, tuple[str, ...]]) -> list[str]:
    """The check for policies that take no options."""
    return [f"policy '{name}' takes no options, got: {', '.join(sorted(options))}"] if options else []
