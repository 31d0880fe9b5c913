"""What one replica holds: its batch, queue and KV cache, its current run of identical passes, and its books.

Every field is set here and read by the modules beside it: schedule.py chooses each run, events.py moves the
replica from event to event, estimates.py answers what routers ask.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable

from replay.book import Book
from replay.replica.cache import PrefixCache
from replay.step import StepModel

INF = float("inf")
KV_BINS = 1000  # the KV occupancy histogram's bins: tenths of a percent of capacity


class ReplicaState:
    """The fields of one replica. `serial` numbers it among all of a run's replicas, `index` within its pool;
    `next_at` is when its current run ends, the one event it has pending: each new one is pushed onto `events`, the
    run's heap of (time, version, serial), where an entry whose version is no longer the replica's is void."""

    __slots__ = (
        "admits",
        "admitted",
        "ahead",
        "book",
        "budget",
        "budget_left",
        "busy",
        "cache",
        "chunks",
        "completions",
        "compute_growth_s",
        "compute_s",
        "cost_rate",
        "cost_sum",
        "cutting",
        "decoding",
        "down",
        "events",
        "fixed_s",
        "fresh",
        "index",
        "key_stride",
        "kv_capacity",
        "kv_held",
        "kv_hist",
        "kv_peak",
        "kv_read",
        "kv_time",
        "loads",
        "max_concurrency",
        "mem_growth_s",
        "mem_s",
        "next_at",
        "on_done",
        "pool",
        "predicted_done",
        "prefill_first",
        "prefill_only",
        "prefilling",
        "queue",
        "queued_pred",
        "queues",
        "repair_at",
        "run_end",
        "run_limit",
        "run_passes",
        "run_start",
        "run_tokens",
        "running",
        "s_per_patch",
        "serial",
        "span_start",
        "spans",
        "step",
        "steps",
        "version",
        "wait_base",
        "wait_extra",
        "wait_step",
        "wait_version",
    )

    def __init__(self, serial: int, pool: int, index: int, step: StepModel, *, max_concurrency: int, budget: int,
                 kv_capacity: int, rate: float, book: Book, loads: list[int], queues: list[int],
                 events: list[tuple[float, int, int]] | None = None, prefill_first: bool = False,
                 caching: bool = True, s_per_patch: float = 0.0, ahead: bool = False) -> None:
        self.serial, self.pool, self.index, self.book = serial, pool, index, book
        # the run ends of all of a run's replicas, as a heap the simulator pops; None when nothing pops it (bench)
        self.events = events
        self.loads, self.queues = loads, queues  # per pool: requests outstanding, and waiting
        self.step: StepModel = step            # the pass model (replay/step.py): every pass time comes from it
        self.s_per_patch: float = s_per_patch  # its vision encoder's seconds per image patch (replay/encode.py)
        # SGLang's schedule (pool_registry.SCHEDULES): a pass of waiting prompts alone whenever there are some
        self.prefill_first: bool = prefill_first
        self.prefill_only = False              # the current run computes prompt chunks only; its decoders wait
        # asynchronous scheduling (EngineShape.async_scheduling): each pass is composed while the one before it runs,
        # so a request joins a pass only if it was waiting when the pass before it began
        self.ahead: bool = ahead
        self.max_concurrency: int = max_concurrency
        self.budget: int = budget              # max_num_batched_tokens: tokens one pass computes at most
        self.kv_capacity: int = kv_capacity    # KV cache tokens
        # the prefix blocks its prefills computed (cache.py); None where no prefill runs (a split's decode pool)
        self.cache: PrefixCache | None = PrefixCache() if caching else None
        self.cost_rate: float = rate           # money per busy second of the replica
        self.steps = 0                         # passes the decoders ran so far
        # the two heaps hold (pass count, request) as one int, pass count x key_stride + request: ordered as the
        # pairs are, and ints compare faster than tuples
        self.key_stride: int = max(len(book.rem), 1)
        self.decoding: list[int] = []          # (pass count at which it finishes, request)
        self.predicted_done: list[int] = []    # (pass count at which it is predicted to finish, request); an
        #                                        entry whose request's book.pfin differs is gone (drop_stale)
        self.prefilling: list[int] = []        # in admission order
        self.queue: deque[int] = deque()       # waiting for admission, first come first served
        self.admitted: list[int] = []          # admission order, for preemption (last in, first out)
        self.fresh: list[int] = []             # decode-only sequences admitted at the current run's start
        self.kv_held = 0                       # KV tokens held (whole prompts reserved at admission)
        self.kv_read = 0                       # KV tokens the running sequences read (computed so far)
        self.running = 0                       # sequences admitted and not finished
        self.queued_pred = 0                   # tokens the waiting requests are predicted to generate
        # the current run, the step model's line for its batch: pass j takes
        # max(mem_s + mem_growth_s j, compute_s + compute_growth_s j) + fixed_s
        self.run_start = self.run_end = 0.0
        self.run_passes = 0                    # passes in the current run; 0 when idle
        self.run_limit = 0                     # passes it lasts unless a sequence finishes (chunks, KV, arrival)
        self.mem_s = self.mem_growth_s = self.compute_s = self.compute_growth_s = 0.0
        self.fixed_s: float = step.overhead_s
        self.chunks: list[tuple[int, int]] = []  # (request, prompt tokens) each pass of the run computes
        self.run_tokens = 0                    # tokens each pass computes
        self.budget_left = 0                   # of max_num_batched_tokens, per pass
        self.admits = False                    # an arrival now would be admitted at the next boundary
        self.cutting = False                   # the current run was shortened for an arrival
        self.version = 0                       # bumped when the run changes (routers' cached wait, ties)
        # when the current run ends, inf when there is none: the simulator's next event of this replica
        self.next_at = INF
        self.cost_sum = 0.0                    # busy cost per token position, summed over passes
        self.busy = 0.0
        self.kv_time = 0.0                     # KV tokens held x seconds
        self.kv_peak = 0                       # the most KV tokens held at once
        # seconds busy at each tenth of a percent of KV capacity held (a run's mean), 0..1000: its high quantiles are
        # what an operator sizing KV reads, where the window's mean hides them
        self.kv_hist: list[float] = [0.0] * (KV_BINS + 1)
        self.span_start = 0.0
        self.spans: list[float] = []           # busy spans as start, end, start, end, ...
        self.on_done: Callable[[int, float], None] | None = None
        self.completions: list[int] | None = None  # when set, every request finishing here is appended
        # wait_estimate's parts that change only with the run (routers ask again and again between events)
        self.wait_version = -1
        self.wait_base = self.wait_extra = self.wait_step = 0.0
        self.down = False                      # failed and not yet repaired: serves nothing, takes no run
        self.repair_at = 0.0

    def let_go(self, i: int) -> int:
        """Request i leaves the batch: release its prefix blocks if they are referenced here; returns the kv_held
        change beyond its whole context (PrefixCache.release)."""
        book, cache = self.book, self.cache
        if cache is None or book.holder[i] != self.serial:
            return 0
        book.holder[i] = -1
        return cache.release(book.blocks[i])

    def drop_stale(self) -> None:
        """Pop the predictions of sequences no longer decoding here off the top of predicted_done, so that its top is
        the first running sequence predicted to finish."""
        pdec, pfin, nkey = self.predicted_done, self.book.pfin, self.key_stride
        while pdec:
            f, i = divmod(pdec[0], nkey)
            if pfin[i] == f:
                return
            heapq.heappop(pdec)
