"""The discrete-event simulator: pools of continuously batching replicas, routing at arrival.

Events are arrivals (in time order, from the plan), the ends of replicas' runs of identical passes (one
pending per replica, its `next_at`), failures and repairs and, for split policies, KV caches landing on their
decode pool and, when images are encoded apart, their encoding ending and their embeddings landing on the
prefill pool (all in one heap, a run end voided by its replica's version when an arrival cuts the run
short). Events at or before an arrival's time are handled first, so a router sees every replica as of that
moment; a run end and an arrival at the same instant put the arrival into the pass that starts then. Requests
no pool can take follow the candidate's overflow rule and are never dropped silently. One seeded RNG per run draws the
round-robin start and, with `noise`, each replica's speed.

Routers see each request's predicted output length (plan.pred_list, from the candidate's predictor), never
its true one, which only decides when it really finishes. A predictor that learns is told of each completion
as it happens and updates the next block's predictions at that block's first arrival. A request routed to a
pool its true context does not fit (the router could not know) has its output stopped at the pool's limit,
as an engine stops a sequence at max_model_len; the summary counts those as truncated.
"""

from __future__ import annotations

import gc
import heapq
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from replay import costmodel, encode
from replay.book import Book
from replay.constraints import why_not
from replay.costmodel import step_model
from replay.faults import PoolFaultModel, next_failure
from replay.plan import Plan
from replay.policies.base import Policy, Router, State
from replay.replica.estimates import Replica
from replay.replica.state import KV_BINS

NONE, QUEUE, DEGRADE, REJECT, UNFIT = 0, 1, 2, 3, 4
FAIL, REPAIR = -2, -3  # the kind of a replica's failure and repair events, before run ends' versions (>= 0)
LAND, ENCODED, EMBEDDED = -1, -4, -5  # a KV cache lands; a request's images are encoded; their embeddings land
NAN = float("nan")
FLAG_NAMES = ("", "queue", "degrade", "reject", "reject")
INF = float("inf")


@dataclass
class Raw:
    """Per-request outcome arrays of one simulation, in plan order, and each replica's busy time."""

    pool: np.ndarray             # int, -1 when rejected
    replica: np.ndarray          # replica index within its pool, -1 when rejected
    decode_pool: np.ndarray      # the pool that decoded (same as pool unless split)
    wait: np.ndarray             # seconds queued (both stages when split), nan when rejected
    wait_first: np.ndarray       # of those, the seconds queued before the first token (an encoder's queue too)
    ttft: np.ndarray
    e2e: np.ndarray
    cost: np.ndarray
    preempted: np.ndarray        # times the request was preempted and recomputed
    flag: np.ndarray             # NONE, QUEUE, DEGRADE, REJECT, UNFIT
    reasons: dict[int, str] = field(default_factory=dict)
    spans: list[tuple[int, int, np.ndarray]] = field(default_factory=list)  # (pool, replica, [start, end, ...])
    kv_time: np.ndarray = field(default_factory=lambda: np.zeros(0))  # per pool: KV tokens held x seconds
    kv_peak: np.ndarray = field(default_factory=lambda: np.zeros(0))  # per pool: most KV tokens one replica held
    kv_hist: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))  # per pool: busy seconds per KV percent
    truncated: dict[int, int] = field(default_factory=dict)  # request -> output tokens it stopped at
    failures: list[int] = field(default_factory=list)        # per pool: replica failures injected
    retried: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))  # per request: retries
    lost_tokens: int = 0                                     # token positions computed, then lost in failures
    cached: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))  # per request: prompt tokens
    #                                                   reused (replayed for a request with blocks, else recorded)
    evicted: list[int] = field(default_factory=list)         # per pool: prefix blocks evicted from its caches
    encode: np.ndarray = field(default_factory=lambda: np.zeros(0))  # per request: vision encoder seconds it paid
    encoded_on: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))  # per request: the pool
    #                                        whose encoder ran on its images (-1 none); empty for a text-only trace


def reject_reason(plan: Plan, i: int, flag: int, policy: Policy) -> str:
    """Why request i was not served."""
    if flag == UNFIT:  # as a gateway judges it: from the prompt, its images and the client's max_tokens
        images = (int(plan.images[i]), int(plan.image_tokens[i])) if plan.image_tokens.size else (0, 0)
        return why_not(str(plan.models[i]), int(plan.in_tokens[i]), int(plan.max_tokens[i]), plan.pools, images)
    what = "the SLA and queue limits" if policy.sla_aware else "the queue limits"
    return f"overflow: no pool met {what} of policy {policy.name}"


def build_replicas(plan: Plan, book: Book, noise: float, rng: np.random.Generator, events: list[tuple[float, int, int]],
                   speed: list[float] | None = None) -> tuple[list[list[Replica]], list[int], list[int]]:
    """Every pool's replicas, with their own speed when the candidate asks for noise, slowed by their pool's
    time-averaged throttling (`speed`, per pool, 1 when never throttled); their run ends go onto `events`."""
    loads, queues = [0] * len(plan.pools), [0] * len(plan.pools)
    sigma2 = float(np.log1p(noise**2))
    out: list[list[Replica]] = []
    rid = 0
    for p, spec in enumerate(plan.pools):
        speeds = rng.lognormal(-sigma2 / 2, np.sqrt(sigma2), spec.replicas) if noise > 0 else np.ones(spec.replicas)
        slow = 1.0 / speed[p] if speed is not None and speed[p] != 1.0 else 1.0
        reps = []
        for r in range(spec.replicas):
            step = step_model(spec, float(speeds[r]) * slow)
            reps.append(Replica(rid, p, r, step, max_concurrency=spec.max_concurrency,
                                budget=spec.max_num_batched_tokens, kv_capacity=spec.kv_capacity_tokens,
                                rate=spec.replica_cost_per_s, book=book, loads=loads, queues=queues, events=events,
                                prefill_first=spec.schedule == "prefill_first", ahead=spec.async_scheduling,
                                s_per_patch=encode.seconds_per_patch(step, spec.model)))
            rid += 1
        out.append(reps)
    return out, loads, queues


def simulate(plan: Plan, policy: Policy, options: dict[str, tuple[str, ...]], overflow_mode: str,
             noise: float = 0.0, faults: list[PoolFaultModel] | None = None, fault_seed: int = 0) -> Raw:
    """Run one replay of the plan, with each pool's failures and throttling when `faults` gives them."""
    # The loop makes millions of short-lived tuples, freed by their reference counts; each collection they trigger walks
    # every live object of the run (5-10 % of its time at 300,000 requests). Cycles made meanwhile wait for the
    # next collection after the run.
    was = gc.isenabled()
    gc.disable()
    try:
        return _simulate(plan, policy, options, overflow_mode, noise, faults, fault_seed)
    finally:
        if was:
            gc.enable()


def _simulate(plan: Plan, policy: Policy, options: dict[str, tuple[str, ...]], overflow_mode: str,
              noise: float, faults: list[PoolFaultModel] | None, fault_seed: int) -> Raw:
    n: int = plan.n
    book = Book(n, plan.cached_tokens.astype(np.int64).tolist(), plan.blocks or None, plan.block_tokens or None,
                plan.in_list, list(plan.patches) or None)
    heap: list[tuple[float, int, int]] = []
    speed = [f.speed for f in faults] if faults is not None else None
    replicas, loads, queues = build_replicas(plan, book, noise, plan.rng, heap, speed)
    flat = [r for reps in replicas for r in reps]
    state = State(plan, replicas, loads, queues)
    if faults is not None:
        state.fail_rate = [f.replica_rate(spec.devices_per_replica) for f, spec in zip(faults, plan.pools, strict=True)]
    router = policy.router(plan, state, options)
    # typed locals: compiled (replay/native.py), the loop then reads them as lists of machine numbers
    prompt: list[int] = plan.prompt_list
    ins: list[int] = plan.in_list
    outs: list[int] = plan.out_list
    pred: list[int] = plan.pred_list
    arrivals: list[float] = plan.arrival_list
    pool_out, rep_out, dpool_out = [-1] * n, [-1] * n, [-1] * n
    flags = [NONE] * n
    splitting = [False] * n
    landing: dict[int, int] = {}
    split: bool = policy.split
    forecast = plan.forecast
    upcoming: int = forecast.next_block if forecast is not None else n  # the next arrival whose predictions refresh
    completed = forecast.completed.append if forecast is not None and forecast.completed is not None else None
    overlong: set[int] = plan.overlong
    truncated: dict[int, int] = {}
    limit: list[int] = plan.limit
    if overlong:
        outs = list(outs)  # cut in place below; the plan keeps the trace's lengths

    if split:
        def handoff(i: int, t: float) -> None:
            if dpool_out[i] >= 0 or not splitting[i]:
                if completed is not None:
                    completed(i)
                return
            p = pool_out[i]
            # what the decode stage asks: the true tokens left to run, and the predicted ones routers read
            book.load(i, 0, ins[i] + 1, outs[i] - 1, pred[i] - 1 if pred[i] > 2 else 1)
            d, met = router.decode_pool(i, p, t)
            if d < 0:  # no decode pool serves this model: decode where the prefill ran
                d, met = p, False
            if not met and flags[i] == NONE:
                flags[i] = QUEUE
            if overlong and i in overlong:
                _cut(i, d, limit, ins, outs, splitting, truncated)
            dpool_out[i] = d
            landing[i] = d
            heapq.heappush(heap, (t + costmodel.kv_transfer_seconds(ins[i], plan.pools[p], plan.pools[d]), LAND,
                                  -1 - i))
        for r in flat:
            r.on_done = handoff
    elif forecast is not None and forecast.completed is not None:
        for r in flat:
            r.completions = forecast.completed

    def land(i: int, t: float) -> None:
        d = landing.pop(i)
        book.load(i, 0, ins[i] + 1, outs[i] - 1, pred[i] - 1 if pred[i] > 2 else 1)
        state.pick(d, t).arrive(i, t)

    overflow = _overflow(plan, state, overflow_mode, policy.split, router)

    rem, held, todo, pleft = book.rem, book.held, book.todo, book.pleft
    route = router.route
    # a split router with an encode stage (pd_split's `encode`): images first, then the prefill pool
    encoding: Callable[[int, float], float] | None = getattr(router, "encode", None) if plan.patches else None
    delay: Callable[[int, int], float] | None = getattr(router, "embedding_delay", None) if encoding else None
    patches = book.patches

    def dispatch(i: int, t: float) -> None:
        """Route request i at t (its arrival, its images' encoding end, or its retry after a failure) and queue it
        there."""
        if encoding is not None and patches[i]:
            done = encoding(i, t)
            if done >= 0:
                heapq.heappush(heap, (done, ENCODED, -1 - i))
                return
        guess = pred[i]
        if split:  # the prefill stage generates the first token
            book.load(i, prompt[i], ins[i], 1 if outs[i] > 1 else outs[i], 1 if guess > 1 else guess)
        else:  # book.load, inline
            rem[i], held[i], todo[i], pleft[i] = prompt[i], ins[i], outs[i], guess
        chosen = route(i, t)
        if chosen is None:
            chosen, flags[i] = overflow(i, t)
            if chosen is None:
                pool_out[i] = -1
                return
        pool_out[i], rep_out[i] = chosen.pool, chosen.index
        if split:
            if outs[i] > 1 and router.splits(chosen.pool):
                splitting[i] = True
                if overlong and i in overlong:
                    _cut(i, chosen.pool, limit, ins, outs, splitting, truncated)
            else:  # served whole where it arrived
                if overlong and i in overlong:
                    _cut(i, chosen.pool, limit, ins, outs, splitting, truncated)
                book.load(i, prompt[i], ins[i], outs[i], 1 if guess > 1 and router.splits(chosen.pool) else guess)
        elif overlong and i in overlong:
            _cut(i, chosen.pool, limit, ins, outs, splitting, truncated)
            book.load(i, prompt[i], ins[i], outs[i], guess)
        if delay is not None:
            x = delay(i, chosen.pool)
            if x > 0:  # encoded apart: the prefill starts when the embeddings are there
                heapq.heappush(heap, (t + x, EMBEDDED, -1 - i))
                return
        chosen.arrive(i, t)

    def embedded(i: int, t: float) -> None:
        """Request i's image embeddings landed on its prefill pool: it joins the replica a request arriving now
        would."""
        r = state.pick(pool_out[i], t)
        rep_out[i] = r.index
        r.arrive(i, t)

    outage = Outage(plan, state, faults, fault_seed, heap)

    def fault(rep: Replica, kind: int, t: float) -> list[int]:
        """A replica fails (kind FAIL) or is back (kind REPAIR) at t; returns a failure's requests, to retry at once."""
        if kind == REPAIR:
            outage.repaired(rep, t)
            return []
        lost = outage.failed(rep, t)
        for i in lost:
            splitting[i] = False
            dpool_out[i] = -1
        return lost

    for i, t in enumerate(arrivals):
        if heap and heap[0][0] <= t:
            _events(flat, heap, t, fault, land, dispatch, embedded)
        if i == upcoming:
            upcoming = plan.refresh(i)
        dispatch(i, t)
    _events(flat, heap, INF, fault, land, dispatch, embedded)
    for r in flat:  # the run's objects are then freed by their reference counts, not left to the collector
        r.on_done = None
    raw = _outcome(plan, policy, book, pool_out, rep_out, dpool_out, flags, replicas)
    raw.truncated = truncated
    raw.failures, raw.retried, raw.lost_tokens = outage.failures, np.array(outage.retried, dtype=np.int64), \
        outage.lost_tokens
    if plan.patches:  # where each request's images were encoded: its encode pool, else the pool that prefilled it
        apart = getattr(getattr(router, "encoders", None), "by", None)
        here = np.where(np.array(plan.patches) > 0, raw.pool, -1)
        raw.encoded_on = np.where(np.array(apart) >= 0, np.array(apart), here) if apart is not None else here
    return raw


def _events(flat: list[Replica], heap: list[tuple[float, int, int]], until: float,
            fault: Callable[[Replica, int, float], list[int]], land: Callable[[int, float], None],
            dispatch: Callable[[int, float], None], embedded: Callable[[int, float], None]) -> None:
    """Handle every event at or before `until`, earliest first. The heap holds (time, kind, id): a replica's run
    end is (time, its version, its serial), void once the replica's version moved on (an arrival cut the run
    short, it went idle or failed); a failure (FAIL) or repair (REPAIR) is (time, kind, serial); a KV cache landing
    on its decode pool is (time, LAND, -1 - request), a request's images encoded apart and their embeddings landing
    (time, ENCODED or EMBEDDED, -1 - request). Ties go by kind or version, then id."""
    pop = heapq.heappop
    while heap:
        ht, kind, rid = heap[0]
        if ht > until:
            return
        pop(heap)
        if kind >= 0:
            rep = flat[rid]
            if rep.version == kind:
                rep.boundary(ht)
        elif rid >= 0:
            for j in fault(flat[rid], kind, ht):  # a closure calling dispatch would hold the run in a cycle
                dispatch(j, ht)
        elif kind == LAND:
            land(-1 - rid, ht)
        elif kind == ENCODED:  # routed on from here, as a failure's requests are, for the same reason
            dispatch(-1 - rid, ht)
        else:
            embedded(-1 - rid, ht)


def _cut(i: int, p: int, limit: list[int], ins: list[int], outs: list[int], splitting: list[bool],
         truncated: dict[int, int]) -> None:
    """Stop request i's output where its context fills pool p's limit."""
    # a function of the module, not a closure: a closure other closures call would hold the run in a cycle
    room = limit[p] - ins[i]
    if outs[i] > room:
        outs[i] = max(room, 2 if splitting[i] else 1)
        truncated[i] = outs[i]


class Outage:
    """The failures of one run: each replica's seeded Poisson process over the replayed window, its repair, and
    what the failures cost (see replay.faults)."""

    def __init__(self, plan: Plan, state: State, faults: list[PoolFaultModel] | None, seed: int,
                 heap: list[tuple[float, int, int]]) -> None:
        self.state, self.heap = state, heap
        self.failures = [0] * len(plan.pools)
        self.patches = plan.patches
        self.retried = [0] * plan.n
        self.lost_tokens = 0
        self.horizon = float(plan.arrival[-1]) if plan.n else 0.0  # failures strike while traffic arrives
        self.repair = [f.repair_s for f in faults] if faults is not None else []
        # its own generator, so that a run without failures draws exactly what it drew before
        self.rng = np.random.default_rng([seed, 0xFA17])
        if faults is None:
            return
        for reps in state.replicas:
            for r in reps:
                self.schedule(r, 0.0)

    def schedule(self, r: Replica, after: float) -> None:
        """Push replica r's next failure, if it falls within the replayed window."""
        t = next_failure(self.rng, self.state.fail_rate[r.pool], after)
        if t <= self.horizon:
            heapq.heappush(self.heap, (t, FAIL, r.serial))

    def failed(self, r: Replica, t: float) -> list[int]:
        """Replica r fails at t: take it out of service until its repair; returns the requests to retry."""
        lost, tokens = r.fail(t)
        self.state.went_down(r)
        r.repair_at = t + self.repair[r.pool]
        heapq.heappush(self.heap, (r.repair_at, REPAIR, r.serial))
        self.failures[r.pool] += 1
        self.lost_tokens += tokens
        first, patches = r.book.first, r.book.patches
        for i in lost:
            self.retried[i] += 1
            first[i] = NAN  # the retry streams its tokens again
            if self.patches:  # and its images are encoded again where it lands
                patches[i] = self.patches[i]
        return lost

    def repaired(self, r: Replica, t: float) -> None:
        """Replica r is back at t."""
        self.state.came_back(r)
        r.repair(t)
        self.schedule(r, t)


def _overflow(plan: Plan, state: State, mode: str, split: bool,
              router: Router) -> Callable[[int, float], tuple[Replica | None, int]]:
    """The function applied when the policy finds no replica: (i, t) -> (replica or None, flag)."""
    orders, code = plan.orders, plan.code
    serves: Callable[[int], bool] | None = getattr(router, "serves", None)  # a split router's encode pools do not

    def overflow(i: int, t: float) -> tuple[Replica | None, int]:
        order = orders[code[i]]
        if split and any(router.splits(p) for p in order):
            order = tuple(p for p in order if router.splits(p))
        elif serves is not None:
            order = tuple(p for p in order if serves(p))
        if not order:
            return None, UNFIT
        if mode == "reject":
            return None, REJECT
        if mode == "degrade":
            return state.pick(order[0], t), DEGRADE
        best, soonest = None, INF
        for p in order:  # the replica predicted to finish the request first
            r = state.pick(p, t)
            end = r.predict(i, t)[1]
            if end < soonest:
                best, soonest = r, end
        return best, QUEUE

    return overflow


def _outcome(plan: Plan, policy: Policy, book: Book, pool_l: list[int], rep_l: list[int], dpool_l: list[int],
             flags: list[int], replicas: list[list[Replica]]) -> Raw:
    pool = np.array(pool_l, dtype=np.int64)
    served = pool >= 0
    nan = np.full(plan.n, np.nan)
    dpool = np.where(np.array(dpool_l, dtype=np.int64) >= 0, np.array(dpool_l, dtype=np.int64), pool)
    first = np.array(book.first, dtype=np.float64)
    done = np.array(book.done, dtype=np.float64)
    ttft = np.where(served, first - plan.arrival, nan)
    e2e = np.where(served, done - plan.arrival, nan)
    # a request with no output token has no first token: it is done when its prompt is
    ttft = np.where(served & np.isnan(ttft), e2e, ttft)
    flag = np.array(flags, dtype=np.int8)
    reasons = {int(i): reject_reason(plan, int(i), int(flag[i]), policy) for i in np.flatnonzero(~served)}
    spans = [(r.pool, r.index, np.array(r.spans)) for reps in replicas for r in reps]
    kv_time = np.array([sum(r.kv_time for r in reps) for reps in replicas])
    kv_peak = np.array([max((r.kv_peak for r in reps), default=0) for reps in replicas], dtype=np.float64)
    kv_hist = np.array([np.sum([r.kv_hist for r in reps], axis=0) if reps else np.zeros(KV_BINS + 1)
                        for reps in replicas]).reshape(len(replicas), KV_BINS + 1)
    evicted = [sum(r.cache.evicted for r in reps if r.cache is not None) for reps in replicas]
    return Raw(pool=pool, replica=np.where(served, np.array(rep_l, dtype=np.int64), -1), decode_pool=dpool,
               wait=np.where(served, np.array(book.wait, dtype=np.float64), nan),
               wait_first=np.where(served, np.array(book.wfirst, dtype=np.float64), nan), ttft=ttft, e2e=e2e,
               cost=np.where(served, np.array(book.cost, dtype=np.float64), nan),
               preempted=np.array(book.preempted, dtype=np.int64), flag=flag, reasons=reasons, spans=spans,
               kv_time=kv_time, kv_peak=kv_peak, kv_hist=kv_hist, cached=np.array(book.cached, dtype=np.int64),
               evicted=evicted, encode=np.array(book.enc, dtype=np.float64) if plan.patches else np.zeros(0))
