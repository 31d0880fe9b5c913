"""sla_cost: the cheapest pool predicted to meet the request's SLA tier, under its queue limit (the seed's rule).

For each pool, cheapest first, the request's replica is picked and its TTFT and e2e are predicted from that
replica's live batch, KV use and queue (Replica.predict); the first pool where both are within the tier wins.

With `max_failure_risk` (a probability), reliability is a soft constraint: a pool whose replica would fail
during the request with a higher probability, 1 - exp(-replica failure rate x predicted e2e), is taken only
when no other pool meets the tier. The risk grows with the request's predicted length, so long requests are the
first kept off unstable pools. Failure rates are the run's (replay.faults: the telemetry or the candidate).
"""

from __future__ import annotations

import math

from replay.plan import Plan
from replay.policies.base import AtArrival, State, no_options
from replay.replica.estimates import Replica

RISK = "max_failure_risk"


class SlaCost:
    """Cheapest pool predicted to meet the SLA, under its queue limit."""

    name = "sla_cost"
    sla_aware = True
    split = False

    def check_options(self, options: dict[str, tuple[str, ...]]) -> list[str]:
        """Only max_failure_risk, a probability in (0, 1)."""
        rest = {k: v for k, v in options.items() if k != RISK}
        if rest:
            return no_options(self.name, rest) if RISK not in options else [
                f"policy 'sla_cost' takes only {RISK}, got: {', '.join(sorted(rest))}"]
        if RISK in options:
            value = options[RISK][0] if len(options[RISK]) == 1 else ""
            try:
                risk = float(value)
            except ValueError:
                risk = -1.0
            if not 0.0 < risk < 1.0:
                return [f"policy option {RISK} must be one probability between 0 and 1, got {value!r}"]
        return []

    def router(self, plan: Plan, state: State, options: dict[str, tuple[str, ...]]) -> _Router | _Wary:
        """Walk the request's pools cheapest first; take the first that meets the SLA and has room."""
        if RISK in options:
            return _Wary(plan, state, float(options[RISK][0]))
        return _Router(plan, state)


class _Router(AtArrival):
    ttft: list[float]
    e2e: list[float]

    def __init__(self, plan: Plan, state: State) -> None:
        super().__init__(plan, state)
        self.ttft, self.e2e = plan.ttft_list, plan.e2e_list

    def route(self, i: int, t: float) -> Replica | None:
        state = self.state
        queues, max_queue = state.queues, state.max_queue
        ttft_limit, e2e_limit = self.ttft[i], self.e2e[i]
        for p in self.orders[self.code[i]]:
            r = state.pick(p, t)  # a direct call: compiled, a method read into a local is a slower generic call
            ttft, e2e = r.predict(i, t)
            # state.has_room, inline: never a failed replica; admitted at once or the queue under its limit
            if ttft <= ttft_limit and e2e <= e2e_limit and not r.down and (
                    r.wait_estimate(t) <= 0.0 or queues[p] < max_queue[p]):
                return r
        return None


class _Wary(_Router):
    """sla_cost that passes over pools too likely to fail during the request while a safer one meets the tier."""

    def __init__(self, plan: Plan, state: State, max_risk: float) -> None:
        super().__init__(plan, state)
        self.max_risk = max_risk
        self.devices = [p.devices_per_replica for p in plan.pools]

    def route(self, i: int, t: float) -> Replica | None:
        state, rate = self.state, self.state.fail_rate
        ttft_limit, e2e_limit = self.ttft[i], self.e2e[i]
        fallback = None
        for p in self.orders[self.code[i]]:
            r = state.pick(p, t)
            ttft, e2e = r.predict(i, t)
            if ttft <= ttft_limit and e2e <= e2e_limit and state.has_room(p, r, t):
                if rate[p] <= 0.0 or -math.expm1(-rate[p] * e2e) <= self.max_risk:
                    return r
                if fallback is None:
                    fallback = r
        return fallback


POLICY = SlaCost()
