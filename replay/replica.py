"""One continuously batching replica, stepped in closed form from event to event.

Every pass runs one token of each decoding sequence plus prompt chunks of admitted sequences, first come
first served, up to max_num_batched_tokens (chunked prefill). Waiting requests are admitted at a pass
boundary, in order, while fewer than max_concurrency sequences run, the pass has token budget left and the
request's KV cache (its whole prompt, plus what it already generated) fits next to the running ones; the head
of the queue blocks the rest. A sequence's first token ends the pass that computes its last prompt chunk.
With the pool's `schedule: prefill_first` (SGLang) a pass computes prompt chunks alone, with the whole budget,
whenever some wait, and the decoders wait for it: `steps` counts the passes the decoders ran, so their heaps
stay valid across such passes.

Between two events the batch does not change: only the context it reads and attends to grows by the tokens
of each pass, so pass j of a run takes max(a + b j, c + d j) + o (memory, compute, and the run's fixed time:
collectives and engine overhead; costmodel.StepModel) and a run of k passes is summed in closed form. A run
ends at the first of: a decoding sequence finishing, a prompt chunk boundary, the KV cache full, or an
arrival the replica could admit (it joins at the next pass boundary). When decoding would overflow the
cache, the most recently admitted sequence is preempted and later recomputed (its prompt and generated
tokens prefilled again), as vLLM does.

What routers read (predict, wait_estimate) knows no request's true output length: a decoding sequence is
predicted to finish when its predicted output length is reached (`predicted_done`, at least one more pass
once that is overdue), and a waiting request to need its predicted length (`queued_pred`). The true lengths
(`decoding`, the book's `todo`) only decide when a sequence really finishes.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Callable

from replay.book import DECODE, DONE, PREFILL, WAITING, Book
from replay.costmodel import StepModel
from replay.passes import fit_passes, passes_within, run_seconds

INF = float("inf")


class Replica:
    """The batch, queue and KV cache of one replica, and its current run of identical passes.

    `serial` numbers it among all of a run's replicas, `index` within its pool; `next_at` is when its current run
    ends, the one event it has pending, and while it has one it is in `active`.
    """

    __slots__ = (
        "active",
        "admits",
        "admitted",
        "book",
        "budget",
        "budget_left",
        "busy",
        "chunks",
        "comm_s",
        "comm_s_per_token",
        "completions",
        "compute_growth_s",
        "compute_s",
        "cost_rate",
        "cost_sum",
        "cutting",
        "decoding",
        "dense",
        "dense_bytes",
        "down",
        "expert_pick",
        "fixed_s",
        "fresh",
        "index",
        "key_stride",
        "kv_bytes",
        "kv_capacity",
        "kv_held",
        "kv_read",
        "kv_time",
        "loads",
        "max_concurrency",
        "mem_growth_s",
        "mem_s",
        "next_at",
        "on_done",
        "overhead_s",
        "plain",
        "pool",
        "pp",
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
        "s_per_byte",
        "s_per_ctx",
        "s_per_token",
        "s_per_token_decode",
        "seq_overhead_s",
        "serial",
        "serial_share",
        "span_start",
        "spans",
        "steps",
        "version",
        "wait_base",
        "wait_extra",
        "wait_step",
        "wait_version",
        "weight_bytes",
        "weight_memo",
        "weight_whole",
    )

    def __init__(self, serial: int, pool: int, index: int, step: StepModel, *, max_concurrency: int, budget: int,
                 kv_capacity: int, rate: float, book: Book, loads: list[int], queues: list[int],
                 active: list[Replica] | None = None, prefill_first: bool = False) -> None:
        self.serial, self.pool, self.index, self.book = serial, pool, index, book
        # the replicas with a pending run end, shared by a run's replicas: the simulator scans only these
        self.active: list[Replica] = active if active is not None else []
        self.loads, self.queues = loads, queues  # per pool: requests outstanding, and waiting
        # the step model's coefficients (costmodel.StepModel), copied: the hot paths read them as attributes. Typed
        # here, as the compiled build does not follow the import of the step model: untyped, every sum and product
        # of them would be a generic call on boxed numbers.
        self.pp: int = int(step.pp)
        self.s_per_byte: float = float(step.s_per_byte)
        self.s_per_token: float = float(step.s_per_token)
        self.kv_bytes: float = float(step.kv_bytes)
        self.s_per_token_decode: float = float(step.s_per_token_decode)
        self.s_per_ctx: float = float(step.s_per_ctx)
        self.overhead_s: float = float(step.overhead_s)
        self.seq_overhead_s: float = float(step.seq_overhead_s)
        self.comm_s: float = float(step.comm_s)
        self.comm_s_per_token: float = float(step.comm_s_per_token)
        self.serial_share: float = float(step.serial_share)
        self.fixed_s: float = self.overhead_s  # the current run's fixed time per pass (collectives, engine)
        self.weight_bytes: float = float(step.weight_bytes)
        self.dense_bytes: float = float(step.dense_bytes)
        self.expert_pick: float = float(step.pick)
        self.dense: bool = self.expert_pick >= 1.0
        self.weight_memo: dict[float, float] = {}  # weight_read by tokens: a MoE pass's experts touched, once
        # the same for whole token counts up to a full pass, in a list (-1: not yet): read at every MoE pass
        self.weight_whole: list[float] = [] if self.dense else [-1.0] * (budget + max_concurrency + 2)
        # no term beyond the roofline and a fixed overhead: policies' predictions take a shortcut
        # SGLang's schedule (pool_registry.SCHEDULES): a pass of waiting prompts alone whenever there are some
        self.prefill_first = prefill_first
        self.prefill_only = False              # the current run computes prompt chunks only; its decoders wait
        self.plain = (self.pp == 1 and self.dense and not (self.seq_overhead_s or self.comm_s or self.comm_s_per_token
                                                           or self.s_per_ctx or self.serial_share)
                      and self.s_per_token_decode == self.s_per_token and not prefill_first)
        self.max_concurrency, self.budget, self.kv_capacity = max_concurrency, budget, kv_capacity
        self.cost_rate = rate                  # money per busy second of the replica
        self.steps = 0                         # passes run so far
        # the two heaps hold (pass count, request) as one int, pass count x key_stride + request: ordered as the
        # pairs are, and ints compare faster than tuples
        self.key_stride = max(len(book.rem), 1)
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
        # the current run: pass j takes max(mem_s + mem_growth_s j, compute_s + compute_growth_s j) + fixed_s
        self.run_start = self.run_end = 0.0
        self.run_passes = 0                    # passes in the current run; 0 when idle
        self.run_limit = 0                     # passes it lasts unless a sequence finishes (chunks, KV, arrival)
        self.mem_s = self.mem_growth_s = self.compute_s = self.compute_growth_s = 0.0
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
        self.span_start = 0.0
        self.spans: list[float] = []           # busy spans as start, end, start, end, ...
        self.on_done: Callable[[int, float], None] | None = None
        self.completions: list[int] | None = None  # when set, every request finishing here is appended
        # wait_estimate's parts that change only with the run (routers ask again and again between events)
        self.wait_version = -1
        self.wait_base = self.wait_extra = self.wait_step = 0.0
        self.down = False                      # failed and not yet repaired: serves nothing, takes no run
        self.repair_at = 0.0

    # -- the pass model -------------------------------------------------------------------------------
    def weight_read(self, tokens: float) -> float:
        """Weight bytes one micro-batch of `tokens` reads."""
        if self.dense:
            return self.weight_bytes
        w = self.weight_memo.get(tokens)
        if w is None:
            w = self.weight_memo[tokens] = self.dense_bytes + (self.weight_bytes - self.dense_bytes) * (
                1.0 - (1.0 - self.expert_pick) ** max(tokens, 1.0))
        return w

    def weight_at(self, tokens: int) -> float:
        """weight_read of a whole number of tokens, remembered in a list."""
        memo = self.weight_whole
        if 0 <= tokens < len(memo):
            w = memo[tokens]
            if w < 0.0:
                w = memo[tokens] = self.weight_read(float(tokens))
            return w
        return self.weight_read(float(tokens))

    def pass_time(self, seqs: int, tokens: int, kv: float, decode: int = 0, context: float = 0.0) -> float:
        """One pass of `seqs` sequences computing `tokens` tokens (`decode` of them decoding), reading `kv` KV
        tokens, with `context` token x context products of attention."""
        pp = self.pp
        work = self.s_per_token * (tokens - decode) + self.s_per_token_decode * decode + self.s_per_ctx * context
        if pp == 1:  # m = 1: the same sums without the factors pp and 1 / m, which are exact ones
            weights = self.weight_bytes if self.dense else self.weight_read(tokens)
            memory = (weights + self.kv_bytes * kv) * self.s_per_byte
            if self.serial_share:
                memory, work = memory + self.serial_share * work, work + self.serial_share * memory
            return ((memory if memory > work else work) + self.overhead_s + self.seq_overhead_s * seqs + self.comm_s
                    + self.comm_s_per_token * tokens)
        m = pp if pp < seqs else (seqs or 1)
        memory = pp * (self.weight_read(tokens / m) + self.kv_bytes * kv / m) * self.s_per_byte
        compute = pp * work / m
        if self.serial_share:
            memory, compute = memory + self.serial_share * compute, compute + self.serial_share * memory
        return ((memory if memory > compute else compute) + self.overhead_s + self.seq_overhead_s * seqs + self.comm_s
                + self.comm_s_per_token * tokens / m)

    # -- events ---------------------------------------------------------------------------------------
    def arrive(self, i: int, t: float) -> None:
        """A request joins this replica's queue at t."""
        book = self.book
        book.enq[i] = t
        book.phase[i] = WAITING
        self.queue.append(i)
        self.queued_pred += book.pleft[i]
        self.loads[self.pool] += 1
        self.queues[self.pool] += 1
        if self.run_passes == 0:
            if self.down:  # held until the repair
                return
            self.span_start = self.run_start = t
            self.plan(t)
        elif self.admits and not self.cutting and (self.kv_held + len(self.decoding) * self.run_passes + book.held[i]
                                                   < self.kv_capacity):
            self.cut(t)

    def cut(self, t: float) -> None:
        """End the current run at the first pass boundary at or after t, where the newcomer joins.

        The run is only shortened here; the boundary is handled when its event comes, so that every request
        arriving before it joins the same pass.
        """
        t0 = self.run_start
        if t <= t0:  # the run starts now: plan it again with the newcomer
            self.plan(t0)
            return
        a, b, c, o, d = self.mem_s, self.mem_growth_s, self.compute_s, self.fixed_s, self.compute_growth_s
        ao = a + o
        if d == 0.0 and a >= c and ao > 0.0:  # memory-bound: passes_within and run_seconds' short form, inline
            dur = t - t0
            j = fit_passes(ao, b, 0, dur)
            while j > 0 and j * ao + b * j * (j - 1) / 2.0 > dur:
                j -= 1
            while (j + 1) * ao + b * (j + 1) * j / 2.0 <= dur:
                j += 1
            tb = t0 + (j * ao + b * j * (j - 1) / 2.0)
            if tb < t:
                j += 1
                tb = t0 + (j * ao + b * j * (j - 1) / 2.0)
        else:
            j = passes_within(a, b, c, o, t - t0, d)
            tb = t0 + run_seconds(a, b, c, o, j, d)
            if tb < t:
                j += 1
                tb = t0 + run_seconds(a, b, c, o, j, d)
        if j >= self.run_passes:
            return
        self.run_passes, self.run_end = j, tb
        if j < self.run_limit:
            self.run_limit = j
        self.version += 1
        self.cutting = True
        self.next_at = tb

    def boundary(self, t: float) -> None:
        """The current run ended at t (its last pass finished): account for it, finish sequences, turn completed
        prefills into decoders, admit, plan."""
        book = self.book
        j = self.run_passes
        if j > 0:  # advance(j, t), inline
            t0 = self.run_start
            dur = t - t0
            paused = self.prefill_only  # prompts alone: the decoders neither advance nor share the cost
            n_d = 0 if paused else len(self.decoding)
            self.wait_version = -1  # the run is being settled: what routers read is recomputed
            self.kv_time += (self.kv_held + n_d * (j - 1) / 2.0) * dur
            if not paused:
                self.steps += j  # passes the decoders ran: their heap keys count these
            self.kv_held += n_d * j
            tokens = self.run_tokens
            self.kv_read += tokens * j
            self.busy += dur
            u = dur * self.cost_rate / tokens
            if not paused:
                self.cost_sum += u
            if self.chunks:
                rem, cost = book.rem, book.cost
                for i, c in self.chunks:
                    rem[i] -= c * j
                    cost[i] += c * u
            if self.fresh and not paused:
                first_token = t0 + run_seconds(self.mem_s, self.mem_growth_s, self.compute_s, self.fixed_s, 1,
                                               self.compute_growth_s)
                ft = book.first
                for i in self.fresh:
                    if ft[i] != ft[i]:  # nan: no token yet
                        ft[i] = first_token
                self.fresh = []
            self.run_start = t
        dec, steps, nkey = self.decoding, self.steps, self.key_stride
        due = (steps + 1) * nkey  # the keys of sequences finishing by this pass count
        if dec and dec[0] < due:
            if self.on_done is None:  # nothing outside this replica runs meanwhile: one sweep, counters summed
                held, cost, phase, done, pfin = book.held, book.cost, book.phase, book.done, book.pfin
                entry_step, entry_u, completions = book.entry_step, book.entry_u, self.completions
                cum_u = self.cost_sum
                pop = heapq.heappop
                freed = n = 0
                while dec and dec[0] < due:
                    i = pop(dec) % nkey
                    freed += held[i] + steps - entry_step[i]
                    cost[i] += cum_u - entry_u[i]
                    n += 1
                    phase[i] = DONE
                    done[i] = t
                    pfin[i] = -1
                    if completions is not None:
                        completions.append(i)
                self.kv_read -= freed
                self.kv_held -= freed
                self.running -= n
                self.loads[self.pool] -= n
                self.drop_stale()
            else:
                while dec and dec[0] < due:
                    self.finish(heapq.heappop(dec) % nkey, t, decoded=True)
        if self.chunks:
            rem, todo, first, phase = book.rem, book.todo, book.first, book.phase
            prefilled = [i for i, _ in self.chunks if rem[i] <= 0]
            for i in prefilled:
                self.prefilling.remove(i)
                todo[i] -= 1
                if first[i] != first[i]:
                    first[i] = t
                if todo[i] <= 0:
                    self.finish(i, t, decoded=False)
                else:
                    phase[i] = DECODE
                    book.held[i] += 1  # the first token's KV, written by the next pass
                    self.kv_held += 1
                    self.kv_read += 1
                    book.entry_u[i] = self.cost_sum
                    book.entry_step[i] = steps
                    heapq.heappush(dec, (steps + todo[i]) * nkey + i)
                    left = book.pleft[i] - 1
                    left = left if left > 1 else 1
                    book.pleft[i] = left
                    book.pfin[i] = steps + left
                    heapq.heappush(self.predicted_done, (steps + left) * nkey + i)
        self.plan(t)

    def advance(self, j: int, t: float) -> None:
        """Account for the first j passes of the current run, ending at t."""
        if j <= 0:
            return
        dur = t - self.run_start
        paused = self.prefill_only
        n_d = 0 if paused else len(self.decoding)
        self.wait_version = -1  # the run is being settled: what routers read is recomputed
        self.kv_time += (self.kv_held + n_d * (j - 1) / 2.0) * dur
        if not paused:
            self.steps += j
        self.kv_held += n_d * j
        self.kv_read += self.run_tokens * j
        self.busy += dur
        u = dur * self.cost_rate / self.run_tokens
        if not paused:
            self.cost_sum += u
        book = self.book
        if self.chunks:
            rem, cost = book.rem, book.cost
            for i, c in self.chunks:
                rem[i] -= c * j
                cost[i] += c * u
        if self.fresh and not paused:
            first = self.run_start + run_seconds(self.mem_s, self.mem_growth_s, self.compute_s, self.fixed_s, 1,
                                                 self.compute_growth_s)
            ft = book.first
            for i in self.fresh:
                if ft[i] != ft[i]:  # nan: no token yet
                    ft[i] = first
            self.fresh = []
        self.run_start = t

    def finish(self, i: int, t: float, *, decoded: bool) -> None:
        """Request i has generated all its tokens at t."""
        book = self.book
        held = book.held[i]
        if decoded:
            held += self.steps - book.entry_step[i]
            book.cost[i] += self.cost_sum - book.entry_u[i]
            self.kv_read -= held
        else:
            self.kv_read -= held
        self.kv_held -= held
        self.running -= 1
        self.loads[self.pool] -= 1
        book.phase[i] = DONE
        book.done[i] = t
        if decoded:
            book.pfin[i] = -1
            self.drop_stale()
        if self.completions is not None:
            self.completions.append(i)
        if self.on_done is not None:
            self.on_done(i, t)

    def drop_stale(self) -> None:
        """Pop the predictions of sequences no longer decoding here off the top of predicted_done, so that its top is
        the first running sequence predicted to finish."""
        pdec, pfin, nkey = self.predicted_done, self.book.pfin, self.key_stride
        while pdec:
            f, i = divmod(pdec[0], nkey)
            if pfin[i] == f:
                return
            heapq.heappop(pdec)

    def evict(self, v: int, t: float) -> None:
        """Preempt sequence v: free its KV cache and put it first in the queue, to be recomputed."""
        book = self.book
        if book.phase[v] == DECODE:
            nkey = self.key_stride
            self.decoding = [x for x in self.decoding if x % nkey != v]
            heapq.heapify(self.decoding)
            passes = self.steps - book.entry_step[v]
            held = book.held[v] + passes
            book.todo[v] -= passes
            left = book.pleft[v] - passes
            book.pleft[v] = left if left > 1 else 1
            book.pfin[v] = -1
            self.drop_stale()
            book.cost[v] += self.cost_sum - book.entry_u[v]
            self.kv_read -= held
            self.kv_held -= held
            book.held[v] = held
        else:
            self.prefilling.remove(v)
            self.kv_held -= book.held[v]
            self.kv_read -= book.held[v] - book.rem[v]
        book.rem[v] = book.held[v] - book.cached[v]
        book.preempted[v] += 1
        book.phase[v] = WAITING
        book.enq[v] = t
        self.running -= 1
        self.queued_pred += book.pleft[v]
        self.queues[self.pool] += 1
        self.queue.appendleft(v)

    # -- planning -------------------------------------------------------------------------------------
    def plan(self, t: float) -> None:
        """Choose the next run's batch at boundary t and schedule its end."""
        book = self.book
        rem = book.rem
        cap = self.kv_capacity
        dec = self.decoding
        if dec and self.kv_held + len(dec) > cap:
            phase = book.phase
            while self.decoding and self.kv_held + len(self.decoding) > cap:  # decoding would overflow the cache
                order = self.admitted
                while phase[order[-1]] not in (PREFILL, DECODE) or book.where[order[-1]] != self.serial:
                    order.pop()
                self.evict(order.pop(), t)
            dec = self.decoding  # evict builds a new heap
        pre, wait = self.prefilling, self.queue
        n_d = len(dec)
        first = self.prefill_first  # a pass of prompts takes the whole budget; decoders run only when none wait
        left = self.budget if first else self.budget - n_d
        tokens = 0 if first else n_d
        chunks = []
        for i in pre:
            if left <= 0:
                break
            c = rem[i] if rem[i] < left else left
            chunks.append((i, c))
            left -= c
            tokens += c
        mc = self.max_concurrency
        n_run = self.running
        if wait and n_run < mc and left > 0:
            # admission, with the counters in locals (nothing outside this replica reads them meanwhile)
            held, phase, pleft, where, bwait, enq = book.held, book.phase, book.pleft, book.where, book.wait, \
                book.enq
            kv_res, kv_read, queued_pred, steps, rid, nkey = self.kv_held, self.kv_read, self.queued_pred, \
                self.steps, self.serial, self.key_stride
            order = self.admitted
            admitted = 0
            while wait and n_run < mc and left > 0:
                i = wait[0]
                h = held[i]
                if kv_res + h + len(dec) + 1 > cap:
                    break
                wait.popleft()
                admitted += 1
                n_run += 1
                kv_res += h
                r = rem[i]
                kv_read += h - r
                queued_pred -= pleft[i]
                order.append(i)
                where[i] = rid
                bwait[i] += t - enq[i]
                if r > 0:
                    phase[i] = PREFILL
                    pre.append(i)
                    c = r if r < left else left
                    chunks.append((i, c))
                    left -= c
                    tokens += c
                else:
                    phase[i] = DECODE
                    book.entry_u[i] = self.cost_sum
                    book.entry_step[i] = steps
                    heapq.heappush(dec, (steps + book.todo[i]) * nkey + i)
                    f = steps + pleft[i]
                    book.pfin[i] = f
                    heapq.heappush(self.predicted_done, f * nkey + i)
                    self.fresh.append(i)
                    if not first:
                        left -= 1
                        tokens += 1
            self.queues[self.pool] -= admitted
            self.running, self.kv_held, self.kv_read, self.queued_pred = n_run, kv_res, kv_read, queued_pred
        paused = first and bool(chunks)
        if first and not chunks:
            tokens = len(dec)  # a decode pass
        self.prefill_only = paused
        self.chunks, self.run_tokens, self.budget_left = chunks, tokens, left
        self.version += 1
        self.cutting = False
        if tokens == 0:
            self.run_passes = self.run_limit = 0
            self.admits = False
            if self.next_at != INF:  # idle now
                self.next_at = INF
                self.active.remove(self)
            self.spans.append(self.span_start)
            self.spans.append(t)
            return
        n_d = len(dec)
        knd = 1 << 62  # what ends the run other than a sequence finishing
        if chunks:
            i, c = chunks[0]
            # several chunks means all but the last finish their prompt this pass; one partial chunk keeps
            # taking the whole budget until its remainder fits
            knd = 1 if len(chunks) > 1 or c >= rem[i] else max(1, (rem[i] - 1) // c)
        if n_d and not paused:
            full = (cap - self.kv_held) // n_d
            if full < knd:
                knd = full
            k = dec[0] // self.key_stride - self.steps
            if knd < k:
                k = knd
        else:
            k = knd
        self.run_limit = knd
        kv_run = self.kv_read
        if paused:  # the pass reads and attends to its prompts' computed prefixes only
            held_l = book.held
            n_d = 0
            kv_run = 0
            for i, _ in chunks:
                kv_run += held_l[i] - rem[i]
        seqs = n_d + len(chunks)
        pp = self.pp
        d = 0.0
        if pp == 1:  # m = 1: the general form below without its factors pp / m, which are exact ones
            weights = self.weight_bytes if self.dense else self.weight_at(tokens)
            spb, kvb = self.s_per_byte, self.kv_bytes
            a = (weights + kvb * kv_run) * spb
            b = kvb * tokens * spb
            spt, sptd = self.s_per_token, self.s_per_token_decode
            comp = spt * tokens if sptd == spt else spt * (tokens - n_d) + sptd * n_d
            o = self.overhead_s
            if not self.plain:
                o += self.seq_overhead_s * seqs + self.comm_s + self.comm_s_per_token * tokens
            if self.s_per_ctx:  # attention over the context: decoders' KV, and each chunk over its computed prefix
                comp += self.s_per_ctx * self.context(chunks, not paused)
                d = self.s_per_ctx * (n_d + (chunks[0][1] ** 2 if len(chunks) == 1 else 0))
        else:
            m = pp if pp < seqs else seqs
            spb = self.s_per_byte * pp / m
            weights = self.weight_bytes if self.dense else self.weight_read(tokens / m)
            a = (weights * m + self.kv_bytes * kv_run) * spb
            b = self.kv_bytes * tokens * spb
            if self.s_per_token_decode == self.s_per_token:
                comp = self.s_per_token * pp * tokens / m
            else:
                comp = (self.s_per_token * (tokens - n_d) + self.s_per_token_decode * n_d) * pp / m
            o = self.overhead_s
            if not self.plain:
                o += self.seq_overhead_s * seqs + self.comm_s + self.comm_s_per_token * tokens / m
            if self.s_per_ctx:
                ctx = self.context(chunks, not paused)
                grow = n_d + (chunks[0][1] ** 2 if len(chunks) == 1 else 0)
                comp += self.s_per_ctx * ctx * pp / m
                d = self.s_per_ctx * grow * pp / m
        u = self.serial_share
        if u:  # max(M, C) + u min(M, C) = max(M + u C, C + u M) for u <= 1: two lines again, the same closed forms
            a, b, comp, d = a + u * comp, b + u * d, comp + u * a, d + u * b
        self.mem_s, self.mem_growth_s, self.compute_s, self.compute_growth_s, self.fixed_s = a, b, comp, d, o
        self.run_passes, self.run_start = k, t
        self.admits = not wait and n_run < mc and left > 0
        # memory-bound from the first pass on (the common case): the closed form without the compute-bound part
        end = t + (k * (a + o) + b * k * (k - 1) / 2.0 if a >= comp and b >= d else run_seconds(a, b, comp, o, k, d))
        if self.next_at == INF:  # busy now
            self.active.append(self)
        self.run_end = self.next_at = end

    def context(self, chunks: list[tuple[int, int]], decoders: bool = True) -> float:
        """Token x context products a pass computes attention on: each decoder's context (when they run), and for
        a chunk of c tokens after r computed ones c x (r + c / 2)."""
        held, rem = self.book.held, self.book.rem
        ctx = float(self.kv_read) if decoders else 0.0
        if decoders:
            for i in self.prefilling:
                ctx -= held[i] - rem[i]  # a prefilling sequence's computed prefix is not a decoder's context
        for i, c in chunks:
            ctx += c * (held[i] - rem[i] + c / 2.0)
        return ctx

    # -- what policies read ---------------------------------------------------------------------------
    def predict(self, i: int, t: float) -> tuple[float, float]:
        """Predicted TTFT and e2e of request i if it joined this replica's queue now."""
        if self.down:  # it starts when the replica is back, as an idle one with this queue
            return self.predict_down(i, t)
        book = self.book
        n_d = len(self.decoding)
        h = book.held[i]
        todo = book.pleft[i]  # predicted, never the true length
        if not self.queue and self.running < self.max_concurrency and self.kv_held + h + n_d + 1 <= self.kv_capacity:
            mem, comp = self.mem_s, self.compute_s
            w = 0.5 * ((mem if mem > comp else comp) + self.fixed_s) if self.run_passes else 0.0
        else:
            w = self.wait_estimate(t)
        p = book.rem[i]
        kv = self.kv_read + h - p
        first = self.prefill_first  # its prompt runs in passes of prompts alone, with the whole budget
        left = (self.budget if first else self.budget - n_d) or 1
        chunk = p if p < left else left
        if self.plain:  # the common case, without the pass model's calls
            spb, kvb, spt, wb, o = self.s_per_byte, self.kv_bytes, self.s_per_token, self.weight_bytes, self.overhead_s
            if p > 0:
                mem, comp = (wb + kvb * (kv + p / 2.0)) * spb, spt * (n_d + chunk)
                ttft = w + -(-p // chunk) * ((mem if mem > comp else comp) + o)
            else:
                mem, comp = (wb + kvb * kv) * spb, spt * (n_d + 1)
                ttft = w + (mem if mem > comp else comp) + o
            if todo <= 1:
                return ttft, ttft
            mem, comp = (wb + kvb * (kv + p + todo / 2.0)) * spb, spt * (n_d + 1)
            return ttft, ttft + (todo - 1) * ((mem if mem > comp else comp) + o)
        seqs = self.running + 1
        ctx = self.kv_read if self.s_per_ctx else 0.0
        if self.pp == 1:  # pass_time's single-stage form, inline: the same sums
            spb, kvb, sptd, sctx = self.s_per_byte, self.kv_bytes, self.s_per_token_decode, self.s_per_ctx
            o0, so, cm0, cmt = self.overhead_s, self.seq_overhead_s, self.comm_s, self.comm_s_per_token
            dense, wb, u = self.dense, self.weight_bytes, self.serial_share
            one = n_d + 1
            if p > 0 and first:
                own = h - p + p / 2.0  # its own prefix, half computed on average
                mem = ((wb if dense else self.weight_at(chunk)) + kvb * own) * spb
                comp = self.s_per_token * chunk + sctx * chunk * own
                if u:
                    mem, comp = mem + u * comp, comp + u * mem
                ttft = w + math.ceil(p / chunk) * ((mem if mem > comp else comp) + o0 + so + cm0 + cmt * chunk)
                if todo <= 1:
                    return ttft, ttft
                wr = wb if dense else self.weight_at(one)
            elif p > 0:
                tok = n_d + chunk
                mem = ((wb if dense else self.weight_at(tok)) + kvb * (kv + p / 2.0)) * spb
                comp = self.s_per_token * chunk + sptd * n_d + sctx * (ctx + chunk * p / 2.0)
                if u:
                    mem, comp = mem + u * comp, comp + u * mem
                ttft = w + math.ceil(p / chunk) * ((mem if mem > comp else comp) + o0 + so * seqs + cm0 + cmt * tok)
                if todo <= 1:
                    return ttft, ttft
                wr = wb if dense else self.weight_at(one)
            else:
                wr = wb if dense else self.weight_at(one)
                mem = (wr + kvb * kv) * spb
                comp = sptd * one + sctx * ctx  # no prefill token: spt x 0 adds an exact 0
                if u:
                    mem, comp = mem + u * comp, comp + u * mem
                ttft = w + ((mem if mem > comp else comp) + o0 + so * seqs + cm0 + cmt * one)
                if todo <= 1:
                    return ttft, ttft
            kv_mid = kv + p + todo / 2.0
            mem = (wr + kvb * kv_mid) * spb
            comp = sptd * one + sctx * (kv_mid if sctx else 0.0)
            if u:
                mem, comp = mem + u * comp, comp + u * mem
            return ttft, ttft + (todo - 1) * ((mem if mem > comp else comp) + o0 + so * seqs + cm0 + cmt * one)
        if p > 0 and first:
            own = h - p + p / 2.0
            ttft = w + math.ceil(p / chunk) * self.pass_time(1, chunk, own, 0, chunk * own)
        elif p > 0:
            ttft = w + math.ceil(p / chunk) * self.pass_time(seqs, n_d + chunk, kv + p / 2.0, n_d,
                                                             ctx + chunk * p / 2.0)
        else:
            ttft = w + self.pass_time(seqs, n_d + 1, kv, n_d + 1, ctx)
        if todo <= 1:
            return ttft, ttft
        kv_mid = kv + p + todo / 2.0
        ctx_mid = kv_mid if self.s_per_ctx else 0.0
        return ttft, ttft + (todo - 1) * self.pass_time(seqs, n_d + 1, kv_mid, n_d + 1, ctx_mid)

    def wait_estimate(self, t: float) -> float:
        """Predicted wait for admission of a request joining now (0 when it would join the next pass).

        A slot frees when the first running sequence is predicted to finish (pf passes from now, at least 1);
        when nothing else ends the current run before that, the run's own pass times say when exactly,
        otherwise pf passes at the current pass time. Then the waiting requests' predicted tokens drain at
        max_concurrency a pass.
        """
        if not self.queue and self.running < self.max_concurrency:
            return 0.0
        if self.wait_version != self.version:
            self.free_slot()
        w = self.wait_base - t + self.wait_extra + self.queued_pred * self.wait_step / self.max_concurrency
        return w if w > 0.0 else 0.0

    def free_slot(self) -> None:
        """When a slot is predicted to free, as a time (wait_base) plus passes (wait_extra), and the pass time; kept
        until the run changes."""
        mem, comp = self.mem_s, self.compute_s
        step = ((mem if mem > comp else comp) + self.fixed_s) if self.run_passes else self.overhead_s
        base, extra = self.run_start, step
        if self.predicted_done:
            pf = self.predicted_done[0] // self.key_stride - self.steps
            if pf < 1:
                pf = 1
            if pf <= self.run_limit:  # the predicted completion ends the current run
                base, extra = (self.run_end if pf == self.run_passes else self.run_start + self.run_time(pf)), 0.0
            else:
                extra = pf * step
        self.wait_base, self.wait_extra, self.wait_step, self.wait_version = base, extra, step, self.version

    def run_time(self, j: int) -> float:
        """Seconds of the first j passes of the current run (as plan() times the whole run)."""
        a, b, c, d, o = self.mem_s, self.mem_growth_s, self.compute_s, self.compute_growth_s, self.fixed_s
        if a >= c and b >= d:
            return j * (a + o) + b * j * (j - 1) / 2.0
        return run_seconds(a, b, c, o, j, d)

    # -- failures -------------------------------------------------------------------------------------
    def fail(self, t: float) -> tuple[list[int], int]:
        """The replica fails at t: every request on it is lost. Returns them (running ones first, in admission
        order, then the queue) and the token positions they had computed here, which are lost with them."""
        if self.run_passes and self.run_end <= t:  # the run's last pass ended as it failed: that boundary happened
            self.boundary(self.run_end)
        if self.run_passes:
            j = passes_within(self.mem_s, self.mem_growth_s, self.compute_s, self.fixed_s, t - self.run_start,
                              self.compute_growth_s)
            j = min(j, self.run_passes - 1)
            self.advance(j, self.run_start + self.run_time(j))
            self.busy += t - self.run_start  # the pass it died in was running
            self.spans.append(self.span_start)
            self.spans.append(t)
        book = self.book
        running = [i for i in self.admitted if book.where[i] == self.serial and book.phase[i] in (PREFILL, DECODE)]
        lost_tokens = 0
        for i in running:
            computed = book.held[i] - book.rem[i] - book.cached[i]
            if book.phase[i] == DECODE:
                passes = self.steps - book.entry_step[i]
                computed += passes
                book.cost[i] += self.cost_sum - book.entry_u[i]
            lost_tokens += max(computed, 0)
            book.pfin[i] = -1
        queued = list(self.queue)
        self.loads[self.pool] -= len(running) + len(queued)
        self.queues[self.pool] -= len(queued)
        for i in queued:
            book.wait[i] += t - book.enq[i]
        self.decoding, self.predicted_done, self.prefilling, self.admitted = [], [], [], []
        self.fresh, self.chunks = [], []
        self.queue = deque()
        self.kv_held = self.kv_read = self.running = self.queued_pred = 0
        self.run_passes = self.run_limit = 0
        self.run_tokens = self.budget_left = 0
        self.admits = self.cutting = False
        self.version += 1
        if self.next_at != INF:  # the pending run end is void
            self.next_at = INF
            self.active.remove(self)
        self.wait_version = -1
        self.down = True
        return running + queued, lost_tokens

    def repair(self, t: float) -> None:
        """Back in service at t: start on what queued while it was down."""
        self.down = False
        self.version += 1
        if self.queue:
            self.span_start = self.run_start = t
            self.plan(t)

    def predict_down(self, i: int, t: float) -> tuple[float, float]:
        """Predict as if repaired now and idle with the queue it holds, then add the time until the repair."""
        self.down = False
        try:
            ttft, e2e = self.predict(i, t)
        finally:
            self.down = True
        delay = self.repair_at - t if self.repair_at > t else 0.0
        return ttft + delay, e2e + delay
