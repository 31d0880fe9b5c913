"""What a routing policy is: given the plan and the replicas' live state, pick where each arrival goes.

A policy binds to one run as a Router. `route(i, t)` returns the replica request i joins, or None when no
pool satisfies the policy's constraints (the simulator then applies the candidate's overflow rule). Routers
only consider pools that pass the static hard constraints (model, context, KV capacity:
`plan.orders[plan.code[i]]`, cheapest first) and must respect each pool's queue limit. SLA-aware policies also
require the predicted TTFT and e2e to meet the tier. A split policy (`split = True`) runs prefill and decode on
different pools: the simulator asks its router for the decode pool when a prefill ends.

Within a pool every replica has its own queue, and a request goes to the replica that would start it soonest:
one with a free sequence slot and an empty queue, the fewest running sequences first (then the lowest index);
when every replica is full, the one whose queue is predicted to drain first (State.pick). Predictions read
each replica's live batch, KV use and queue (Replica.predict).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from mypy_extensions import mypyc_attr

from replay.plan import Plan
from replay.replica.estimates import Replica


class State:
    """The live replicas of every pool, as the simulator keeps them and policies read them."""

    def __init__(self, plan: Plan, replicas: list[list[Replica]], loads: list[int], queues: list[int]) -> None:
        self.plan = plan
        self.replicas = replicas
        self.loads = loads        # per pool: requests routed there and not finished
        self.queues = queues      # per pool: requests waiting for admission
        self.max_queue: list[int] = [p.max_queue for p in plan.pools]
        self.slots: list[float] = [float(p.slots) for p in plan.pools]
        self.up = [list(reps) for reps in replicas]  # per pool, the replicas in service, in index order
        self.fail_rate = [0.0] * len(plan.pools)     # per pool, failures per second of one replica

    def went_down(self, r: Replica) -> None:
        """Replica r failed: routers stop picking it."""
        self.up[r.pool].remove(r)

    def came_back(self, r: Replica) -> None:
        """Replica r is repaired: back among its pool's choices, in index order."""
        up = self.up[r.pool]
        up.append(r)
        up.sort(key=lambda x: x.index)

    def pick(self, p: int, t: float) -> Replica:
        """The replica of pool p a request arriving at t joins (see the module docstring); a failed one only
        when the whole pool is down (the one back first)."""
        reps = self.up[p]
        if len(reps) == 1:
            return reps[0]
        if not reps:
            return min(self.replicas[p], key=lambda r: r.repair_at)
        best, load = None, 1 << 62
        for r in reps:
            if r.running < load and r.running < r.max_concurrency and not r.queue:
                best, load = r, r.running
        if best is not None:
            return best
        soonest = float("inf")
        for r in reps:  # the first whose queue is predicted to drain first
            w = r.wait_estimate(t)
            if w < soonest:
                best, soonest = r, w
        return best if best is not None else reps[0]

    def queue_length(self, p: int) -> int:
        """Requests waiting for admission in pool p."""
        return self.queues[p]

    def has_room(self, p: int, replica: Replica, t: float) -> bool:
        """Whether a request may join: it would be admitted at once, or the pool's queue is under its limit; never
        a failed replica (a gateway's health check takes it out)."""
        if replica.down:
            return False
        return self.predicted_wait(replica, t) <= 0.0 or self.queue_length(p) < self.max_queue[p]

    def predicted_wait(self, replica: Replica, t: float) -> float:
        """How long a request joining this replica now would wait for admission."""
        return replica.wait_estimate(t)


class Router(Protocol):
    """A policy bound to one run."""

    def route(self, i: int, t: float) -> Replica | None:
        """The replica request i joins at arrival, or None for overflow."""
        ...

    def splits(self, p: int) -> bool:
        """Whether requests prefilled on pool p move on to decode on another pool."""
        ...

    def decode_pool(self, i: int, p: int, t: float) -> tuple[int, bool]:
        """For split policies: the pool that decodes request i after its prefill on pool p ended at t, and
        whether it is predicted to meet the e2e limit; -1 when none serves the model."""
        ...


class Policy(Protocol):
    """A routing policy: validated options, and a router per run."""

    name: str
    sla_aware: bool
    split: bool

    def check_options(self, options: dict[str, tuple[str, ...]]) -> list[str]:
        """Problems with the candidate's policy options (empty when fine)."""
        ...

    def router(self, plan: Plan, state: State, options: dict[str, tuple[str, ...]]) -> Router:
        """The per-arrival decision function for one run."""
        ...


@mypyc_attr(allow_interpreted_subclasses=True)  # a policy written in plain Python may build on it
class AtArrival:
    """Base of routers that decide once, at arrival: decode stays where the prefill ran."""

    orders: list[tuple[int, ...]]
    code: list[int]
    state: State

    def __init__(self, plan: Plan, state: State) -> None:
        self.orders, self.code, self.state = plan.orders, plan.code, state

    def splits(self, p: int) -> bool:
        """Never: every request runs where it arrived."""
        return False

    def decode_pool(self, i: int, p: int, t: float) -> tuple[int, bool]:
        """Decode where the prefill ran."""
        return p, True


def no_options(name: str, options: dict[str, tuple[str, ...]]) -> list[str]:
    """The check for policies that take no options."""
    return [f"policy '{name}' takes no options, got: {', '.join(sorted(options))}"] if options else []


@mypyc_attr(allow_interpreted_subclasses=True)
class ArrivalPolicy:
    """A policy without options whose router decides once, at arrival: its name and its router's class."""

    sla_aware = False
    split = False

    def __init__(self, name: str, make: Callable[[Plan, State], Router]) -> None:
        self.name, self.make = name, make

    def check_options(self, options: dict[str, tuple[str, ...]]) -> list[str]:
        """No options."""
        return no_options(self.name, options)

    def router(self, plan: Plan, state: State, options: dict[str, tuple[str, ...]]) -> Router:
        """The router for one run."""
        return self.make(plan, state)
