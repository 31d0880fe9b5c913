"""One continuously batching replica, stepped in closed form from event to event.

Every pass runs one token of each decoding sequence plus prompt chunks of admitted sequences, first come
first served, up to max_num_batched_tokens (chunked prefill). Waiting requests are admitted at a pass
boundary, in order, while fewer than max_concurrency sequences run, the pass has token budget left and the
request's KV cache (its whole prompt, plus what it already generated) fits next to the running ones; the head
of the queue blocks the rest. A sequence's first token ends the pass that computes its last prompt chunk.

Between two events the batch does not change: only the context it reads and attends to grows by the tokens
of each pass, so pass j of a run takes max(a + b j, c + d j) + o (memory, compute, and the run's fixed time:
collectives and engine overhead; costmodel.StepModel) and a run of k passes is summed in closed form. A run
ends at the first of: a decoding sequence finishing, a prompt chunk boundary, the KV cache full, or an
arrival the replica could admit (it joins at the next pass boundary). When decoding would overflow the
cache, the most recently admitted sequence is preempted and later recomputed (its prompt and generated
tokens prefilled again), as vLLM does.

What routers read (predict, wait_estimate) knows no request's true output length: a decoding sequence is
predicted to finish when its predicted output length is reached (`pdec`, at least one more pass once that is
overdue), and a waiting request to need its predicted length (`queued_pred`). The true lengths (`dec`, the
book's `todo`) only decide when a sequence really finishes.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Callable

from replay.book import DECODE, DONE, PREFILL, WAITING, Book
from replay.costmodel import StepModel, fit_passes, passes_within, run_seconds


class Replica:
    """The batch, queue and KV cache of one replica, and its current run of identical passes."""

    __slots__ = (
        "a",
        "b",
        "book",
        "budget",
        "busy",
        "c",
        "cap",
        "chunks",
        "cm0",
        "cmt",
        "completions",
        "cum_u",
        "cutting",
        "d",
        "dbytes",
        "dec",
        "dense",
        "down",
        "end",
        "fresh",
        "index",
        "k",
        "knd",
        "kv_read",
        "kv_res",
        "kv_time",
        "kvb",
        "left",
        "loads",
        "mc",
        "n_run",
        "nkey",
        "o",
        "o0",
        "on_done",
        "open",
        "order",
        "pdec",
        "plain",
        "pool",
        "pp",
        "pre",
        "push",
        "queued_pred",
        "queues",
        "rate",
        "repair_at",
        "rid",
        "sctx",
        "share",
        "so",
        "span0",
        "spans",
        "spb",
        "spt",
        "sptd",
        "steps",
        "t0",
        "tokens",
        "ver",
        "wait",
        "wbase",
        "wbytes",
        "wextra",
        "wmemo",
        "wstep",
        "wver",
    )

    def __init__(self, rid: int, pool: int, index: int, step: StepModel, *, max_concurrency: int, budget: int,
                 kv_capacity: int, rate: float, book: Book, push: Callable[[tuple[float, int, int]], None],
                 loads: list[int], queues: list[int]) -> None:
        self.rid, self.pool, self.index, self.book, self.push = rid, pool, index, book, push
        self.loads, self.queues = loads, queues  # per pool: requests outstanding, and waiting
        self.pp, self.spb, self.spt, self.kvb = step.pp, step.s_per_byte, step.s_per_token, step.kv_bytes
        self.sptd, self.sctx = step.s_per_token_decode, step.s_per_ctx
        self.o0, self.so, self.cm0, self.cmt = step.overhead_s, step.seq_overhead_s, step.comm_s, step.comm_s_per_token
        self.o = self.o0                       # the current run's fixed time per pass (collectives, engine)
        self.wbytes, self.dbytes, self.share = step.weight_bytes, step.dense_bytes, step.pick
        self.dense = step.pick >= 1.0
        self.wmemo: dict[float, float] = {}    # weight_read by tokens: a MoE pass's experts touched, computed once
        # no term beyond the roofline and a fixed overhead: policies' predictions take a shortcut
        self.plain = (self.pp == 1 and self.dense and not (self.so or self.cm0 or self.cmt or self.sctx)
                      and self.sptd == self.spt)
        self.mc, self.budget, self.cap, self.rate = max_concurrency, budget, kv_capacity, rate
        self.t0 = 0.0
        self.steps = 0
        # the two heaps hold (pass count, request) as one int, pass count x nkey + request: ordered as the pairs
        # are, and ints compare faster than tuples
        self.nkey = max(len(book.rem), 1)
        self.dec: list[int] = []               # (pass count at which it finishes, request)
        self.pdec: list[int] = []              # (pass count at which it is predicted to finish, request); an
        #                                        entry whose request's book.pfin differs is gone (drop_stale)
        self.pre: list[int] = []               # prefilling, in admission order
        self.wait: deque[int] = deque()
        self.order: list[int] = []             # admission order, for preemption (last in, first out)
        self.fresh: list[int] = []             # decode-only sequences admitted at the current run's start
        self.kv_res = 0                        # KV tokens held (whole prompts reserved at admission)
        self.kv_read = 0                       # KV tokens the running sequences read (computed so far)
        self.n_run = 0
        self.queued_pred = 0                   # tokens the waiting requests are predicted to generate
        self.chunks: list[tuple[int, int]] = []
        self.k = 0                             # passes in the current run; 0 when idle
        self.knd = 0                           # passes it lasts unless a sequence finishes (chunks, KV, arrival)
        self.a = self.b = self.c = self.d = 0.0
        self.tokens = 0
        self.left = 0
        self.open = False                      # an arrival now would be admitted at the next boundary
        self.cutting = False                   # the current run was shortened for an arrival
        self.ver = 0
        self.end = 0.0
        self.cum_u = 0.0                       # busy cost per token position, summed over passes
        self.busy = 0.0
        self.kv_time = 0.0
        self.span0 = 0.0
        self.spans: list[float] = []           # busy spans as start, end, start, end, ...
        self.on_done: Callable[[int, float], None] | None = None
        self.completions: list[int] | None = None  # when set, every request finishing here is appended
        # wait_estimate's parts that change only with the run (routers ask again and again between events)
        self.wver = -1
        self.wbase = self.wextra = self.wstep = 0.0
        self.down = False                      # failed and not yet repaired: serves nothing, takes no run
        self.repair_at = 0.0

    # -- the pass model -------------------------------------------------------------------------------
    def weight_read(self, tokens: float) -> float:
        """Weight bytes one micro-batch of `tokens` reads."""
        if self.dense:
            return self.wbytes
        w = self.wmemo.get(tokens)
        if w is None:
            w = self.wmemo[tokens] = self.dbytes + (self.wbytes - self.dbytes) * (
                1.0 - (1.0 - self.share) ** max(tokens, 1.0))
        return w

    def pass_time(self, seqs: int, tokens: int, kv: float, decode: int = 0, context: float = 0.0) -> float:
        """One pass of `seqs` sequences computing `tokens` tokens (`decode` of them decoding), reading `kv` KV
        tokens, with `context` token x context products of attention."""
        pp = self.pp
        if pp == 1:  # m = 1: the same sums without the factors pp and 1 / m, which are exact ones
            memory = ((self.wbytes if self.dense else self.weight_read(tokens)) + self.kvb * kv) * self.spb
            compute = self.spt * (tokens - decode) + self.sptd * decode + self.sctx * context
            return (memory if memory > compute else compute) + self.o0 + self.so * seqs + self.cm0 + \
                self.cmt * tokens
        m = pp if pp < seqs else (seqs or 1)
        memory = pp * (self.weight_read(tokens / m) + self.kvb * kv / m) * self.spb
        compute = pp * (self.spt * (tokens - decode) + self.sptd * decode + self.sctx * context) / m
        return (memory if memory > compute else compute) + self.o0 + self.so * seqs + self.cm0 + \
            self.cmt * tokens / m

    # -- events ---------------------------------------------------------------------------------------
    def arrive(self, i: int, t: float) -> None:
        """A request joins this replica's queue at t."""
        book = self.book
        book.enq[i] = t
        book.phase[i] = WAITING
        self.wait.append(i)
        self.queued_pred += book.pleft[i]
        self.loads[self.pool] += 1
        self.queues[self.pool] += 1
        if self.k == 0:
            if self.down:  # held until the repair
                return
            self.span0 = self.t0 = t
            self.plan(t)
        elif self.open and not self.cutting and self.kv_res + len(self.dec) * self.k + book.held[i] < self.cap:
            self.cut(t)

    def cut(self, t: float) -> None:
        """End the current run at the first pass boundary at or after t, where the newcomer joins.

        The run is only shortened here; the boundary is handled when its event comes, so that every request
        arriving before it joins the same pass.
        """
        t0 = self.t0
        if t <= t0:  # the run starts now: plan it again with the newcomer
            self.plan(t0)
            return
        a, b, c, o, d = self.a, self.b, self.c, self.o, self.d
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
        if j >= self.k:
            return
        self.k, self.end = j, tb
        if j < self.knd:
            self.knd = j
        self.ver += 1
        self.cutting = True
        self.push((tb, self.ver, self.rid))

    def boundary(self, t: float) -> None:
        """The current run ended at t (its last pass finished): account for it, finish sequences, turn completed
        prefills into decoders, admit, plan."""
        book = self.book
        j = self.k
        if j > 0:  # advance(j, t), inline
            t0 = self.t0
            dur = t - t0
            n_d = len(self.dec)
            self.wver = -1  # the run is being settled: what routers read is recomputed
            self.kv_time += (self.kv_res + n_d * (j - 1) / 2.0) * dur
            self.steps += j
            self.kv_res += n_d * j
            tokens = self.tokens
            self.kv_read += tokens * j
            self.busy += dur
            u = dur * self.rate / tokens
            self.cum_u += u
            if self.chunks:
                rem, cost = book.rem, book.cost
                for i, c in self.chunks:
                    rem[i] -= c * j
                    cost[i] += c * u
            if self.fresh:
                first_token = t0 + run_seconds(self.a, self.b, self.c, self.o, 1, self.d)
                ft = book.first
                for i in self.fresh:
                    if ft[i] != ft[i]:  # nan: no token yet
                        ft[i] = first_token
                self.fresh = []
            self.t0 = t
        dec, steps, nkey = self.dec, self.steps, self.nkey
        due = (steps + 1) * nkey  # the keys of sequences finishing by this pass count
        if dec and dec[0] < due:
            if self.on_done is None:  # nothing outside this replica runs meanwhile: one sweep, counters summed
                held, cost, phase, done, pfin = book.held, book.cost, book.phase, book.done, book.pfin
                entry_step, entry_u, completions = book.entry_step, book.entry_u, self.completions
                cum_u = self.cum_u
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
                self.kv_res -= freed
                self.n_run -= n
                self.loads[self.pool] -= n
                self.drop_stale()
            else:
                while dec and dec[0] < due:
                    self.finish(heapq.heappop(dec) % nkey, t, decoded=True)
        if self.chunks:
            rem, todo, first, phase = book.rem, book.todo, book.first, book.phase
            prefilled = [i for i, _ in self.chunks if rem[i] <= 0]
            for i in prefilled:
                self.pre.remove(i)
                todo[i] -= 1
                if first[i] != first[i]:
                    first[i] = t
                if todo[i] <= 0:
                    self.finish(i, t, decoded=False)
                else:
                    phase[i] = DECODE
                    book.held[i] += 1  # the first token's KV, written by the next pass
                    self.kv_res += 1
                    self.kv_read += 1
                    book.entry_u[i] = self.cum_u
                    book.entry_step[i] = steps
                    heapq.heappush(dec, (steps + todo[i]) * nkey + i)
                    left = book.pleft[i] - 1
                    left = left if left > 1 else 1
                    book.pleft[i] = left
                    book.pfin[i] = steps + left
                    heapq.heappush(self.pdec, (steps + left) * nkey + i)
        self.plan(t)

    def advance(self, j: int, t: float) -> None:
        """Account for the first j passes of the current run, ending at t."""
        if j <= 0:
            return
        dur = t - self.t0
        n_d = len(self.dec)
        self.wver = -1  # the run is being settled: what routers read is recomputed
        self.kv_time += (self.kv_res + n_d * (j - 1) / 2.0) * dur
        self.steps += j
        self.kv_res += n_d * j
        self.kv_read += self.tokens * j
        self.busy += dur
        u = dur * self.rate / self.tokens
        self.cum_u += u
        book = self.book
        if self.chunks:
            rem, cost = book.rem, book.cost
            for i, c in self.chunks:
                rem[i] -= c * j
                cost[i] += c * u
        if self.fresh:
            first = self.t0 + run_seconds(self.a, self.b, self.c, self.o, 1, self.d)
            ft = book.first
            for i in self.fresh:
                if ft[i] != ft[i]:  # nan: no token yet
                    ft[i] = first
            self.fresh = []
        self.t0 = t

    def finish(self, i: int, t: float, *, decoded: bool) -> None:
        """Request i has generated all its tokens at t."""
        book = self.book
        held = book.held[i]
        if decoded:
            held += self.steps - book.entry_step[i]
            book.cost[i] += self.cum_u - book.entry_u[i]
            self.kv_read -= held
        else:
            self.kv_read -= held
        self.kv_res -= held
        self.n_run -= 1
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
        """Pop the predictions of sequences no longer decoding here off the top of pdec, so that its top is
        the first running sequence predicted to finish."""
        pdec, pfin, nkey = self.pdec, self.book.pfin, self.nkey
        while pdec:
            f, i = divmod(pdec[0], nkey)
            if pfin[i] == f:
                return
            heapq.heappop(pdec)

    def evict(self, v: int, t: float) -> None:
        """Preempt sequence v: free its KV cache and put it first in the queue, to be recomputed."""
        book = self.book
        if book.phase[v] == DECODE:
            nkey = self.nkey
            self.dec = [x for x in self.dec if x % nkey != v]
            heapq.heapify(self.dec)
            passes = self.steps - book.entry_step[v]
            held = book.held[v] + passes
            book.todo[v] -= passes
            left = book.pleft[v] - passes
            book.pleft[v] = left if left > 1 else 1
            book.pfin[v] = -1
            self.drop_stale()
            book.cost[v] += self.cum_u - book.entry_u[v]
            self.kv_read -= held
            self.kv_res -= held
            book.held[v] = held
        else:
            self.pre.remove(v)
            self.kv_res -= book.held[v]
            self.kv_read -= book.held[v] - book.rem[v]
        book.rem[v] = book.held[v] - book.cached[v]
        book.preempted[v] += 1
        book.phase[v] = WAITING
        book.enq[v] = t
        self.n_run -= 1
        self.queued_pred += book.pleft[v]
        self.queues[self.pool] += 1
        self.wait.appendleft(v)

    # -- planning -------------------------------------------------------------------------------------
    def plan(self, t: float) -> None:
        """Choose the next run's batch at boundary t and schedule its end."""
        book = self.book
        rem = book.rem
        cap = self.cap
        dec = self.dec
        if dec and self.kv_res + len(dec) > cap:
            phase = book.phase
            while self.dec and self.kv_res + len(self.dec) > cap:  # decoding would overflow the cache
                order = self.order
                while phase[order[-1]] not in (PREFILL, DECODE) or book.where[order[-1]] != self.rid:
                    order.pop()
                self.evict(order.pop(), t)
            dec = self.dec  # evict builds a new heap
        pre, wait = self.pre, self.wait
        n_d = len(dec)
        left = self.budget - n_d
        tokens = n_d
        chunks = []
        for i in pre:
            if left <= 0:
                break
            c = rem[i] if rem[i] < left else left
            chunks.append((i, c))
            left -= c
            tokens += c
        mc = self.mc
        n_run = self.n_run
        if wait and n_run < mc and left > 0:
            # admission, with the counters in locals (nothing outside this replica reads them meanwhile)
            held, phase, pleft, where, bwait, enq = book.held, book.phase, book.pleft, book.where, book.wait, \
                book.enq
            kv_res, kv_read, queued_pred, steps, rid, nkey = self.kv_res, self.kv_read, self.queued_pred, \
                self.steps, self.rid, self.nkey
            order = self.order
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
                    book.entry_u[i] = self.cum_u
                    book.entry_step[i] = steps
                    heapq.heappush(dec, (steps + book.todo[i]) * nkey + i)
                    f = steps + pleft[i]
                    book.pfin[i] = f
                    heapq.heappush(self.pdec, f * nkey + i)
                    self.fresh.append(i)
                    left -= 1
                    tokens += 1
            self.queues[self.pool] -= admitted
            self.n_run, self.kv_res, self.kv_read, self.queued_pred = n_run, kv_res, kv_read, queued_pred
        self.chunks, self.tokens, self.left = chunks, tokens, left
        self.ver += 1
        self.cutting = False
        if tokens == 0:
            self.k = self.knd = 0
            self.open = False
            self.spans.append(self.span0)
            self.spans.append(t)
            return
        n_d = len(dec)
        knd = 1 << 62  # what ends the run other than a sequence finishing
        if chunks:
            i, c = chunks[0]
            # several chunks means all but the last finish their prompt this pass; one partial chunk keeps
            # taking the whole budget until its remainder fits
            knd = 1 if len(chunks) > 1 or c >= rem[i] else max(1, (rem[i] - 1) // c)
        if n_d:
            full = (cap - self.kv_res) // n_d
            if full < knd:
                knd = full
            k = dec[0] // self.nkey - self.steps
            if knd < k:
                k = knd
        else:
            k = knd
        self.knd = knd
        seqs = n_d + len(chunks)
        pp = self.pp
        d = 0.0
        if pp == 1:  # m = 1: the general form below without its factors pp / m, which are exact ones
            weights = self.wbytes if self.dense else (self.wmemo.get(tokens) or self.weight_read(tokens))
            spb, kvb = self.spb, self.kvb
            a = (weights + kvb * self.kv_read) * spb
            b = kvb * tokens * spb
            comp = self.spt * tokens if self.sptd == self.spt else self.spt * (tokens - n_d) + self.sptd * n_d
            o = self.o0
            if not self.plain:
                o += self.so * seqs + self.cm0 + self.cmt * tokens
            if self.sctx:  # attention over the context: decoders' KV, and each chunk over its computed prefix
                comp += self.sctx * self.context(chunks)
                d = self.sctx * (n_d + (chunks[0][1] ** 2 if len(chunks) == 1 else 0))
        else:
            m = pp if pp < seqs else seqs
            spb = self.spb * pp / m
            weights = self.wbytes if self.dense else self.weight_read(tokens / m)
            a = (weights * m + self.kvb * self.kv_read) * spb
            b = self.kvb * tokens * spb
            if self.sptd == self.spt:
                comp = self.spt * pp * tokens / m
            else:
                comp = (self.spt * (tokens - n_d) + self.sptd * n_d) * pp / m
            o = self.o0
            if not self.plain:
                o += self.so * seqs + self.cm0 + self.cmt * tokens / m
            if self.sctx:
                ctx = self.context(chunks)
                grow = n_d + (chunks[0][1] ** 2 if len(chunks) == 1 else 0)
                comp += self.sctx * ctx * pp / m
                d = self.sctx * grow * pp / m
        self.a, self.b, self.c, self.d, self.o, self.k, self.t0 = a, b, comp, d, o, k, t
        self.open = not wait and n_run < mc and left > 0
        # memory-bound from the first pass on (the common case): the closed form without the compute-bound part
        end = t + (k * (a + o) + b * k * (k - 1) / 2.0 if a >= comp and b >= d else run_seconds(a, b, comp, o, k, d))
        self.end = end
        self.push((end, self.ver, self.rid))

    def context(self, chunks: list[tuple[int, int]]) -> float:
        """Token x context products a pass computes attention on: each decoder's context, and for a chunk of
        c tokens after r computed ones c x (r + c / 2)."""
        held, rem = self.book.held, self.book.rem
        ctx = float(self.kv_read)
        for i in self.pre:
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
        n_d = len(self.dec)
        h = book.held[i]
        todo = book.pleft[i]  # predicted, never the true length
        if not self.wait and self.n_run < self.mc and self.kv_res + h + n_d + 1 <= self.cap:
            w = 0.5 * ((self.a if self.a > self.c else self.c) + self.o) if self.k else 0.0
        else:
            w = self.wait_estimate(t)
        p = book.rem[i]
        kv = self.kv_read + h - p
        left = self.budget - n_d or 1
        chunk = p if p < left else left
        if self.plain:  # the common case, without the pass model's calls
            spb, kvb, spt, wb, o = self.spb, self.kvb, self.spt, self.wbytes, self.o0
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
        seqs = self.n_run + 1
        ctx = self.kv_read if self.sctx else 0.0
        if self.pp == 1:  # pass_time's single-stage form, inline: the same sums
            spb, kvb, sptd, sctx, o0, so, cm0, cmt = self.spb, self.kvb, self.sptd, self.sctx, self.o0, self.so, \
                self.cm0, self.cmt
            dense, wb = self.dense, self.wbytes
            one = n_d + 1
            if p > 0:
                tok = n_d + chunk
                mem = ((wb if dense else self.weight_read(tok)) + kvb * (kv + p / 2.0)) * spb
                comp = self.spt * chunk + sptd * n_d + sctx * (ctx + chunk * p / 2.0)
                ttft = w + math.ceil(p / chunk) * ((mem if mem > comp else comp) + o0 + so * seqs + cm0 + cmt * tok)
                if todo <= 1:
                    return ttft, ttft
                wr = wb if dense else self.weight_read(one)
            else:
                wr = wb if dense else self.weight_read(one)
                mem = (wr + kvb * kv) * spb
                comp = sptd * one + sctx * ctx  # no prefill token: spt x 0 adds an exact 0
                ttft = w + ((mem if mem > comp else comp) + o0 + so * seqs + cm0 + cmt * one)
                if todo <= 1:
                    return ttft, ttft
            kv_mid = kv + p + todo / 2.0
            mem = (wr + kvb * kv_mid) * spb
            comp = sptd * one + sctx * (kv_mid if sctx else 0.0)
            return ttft, ttft + (todo - 1) * ((mem if mem > comp else comp) + o0 + so * seqs + cm0 + cmt * one)
        if p > 0:
            ttft = w + math.ceil(p / chunk) * self.pass_time(seqs, n_d + chunk, kv + p / 2.0, n_d,
                                                             ctx + chunk * p / 2.0)
        else:
            ttft = w + self.pass_time(seqs, n_d + 1, kv, n_d + 1, ctx)
        if todo <= 1:
            return ttft, ttft
        kv_mid = kv + p + todo / 2.0
        return ttft, ttft + (todo - 1) * self.pass_time(seqs, n_d + 1, kv_mid, n_d + 1, kv_mid if self.sctx else 0.0)

    def wait_estimate(self, t: float) -> float:
        """Predicted wait for admission of a request joining now (0 when it would join the next pass).

        A slot frees when the first running sequence is predicted to finish (pf passes from now, at least 1);
        when nothing else ends the current run before that, the run's own pass times say when exactly,
        otherwise pf passes at the current pass time. Then the waiting requests' predicted tokens drain at
        max_concurrency a pass.
        """
        if not self.wait and self.n_run < self.mc:
            return 0.0
        if self.wver != self.ver:
            self.free_slot()
        w = self.wbase - t + self.wextra + self.queued_pred * self.wstep / self.mc
        return w if w > 0.0 else 0.0

    def free_slot(self) -> None:
        """When a slot is predicted to free, as a time (wbase) plus passes (wextra), and the pass time; kept
        until the run changes."""
        step = ((self.a if self.a > self.c else self.c) + self.o) if self.k else self.o0
        base, extra = self.t0, step
        if self.pdec:
            pf = self.pdec[0] // self.nkey - self.steps
            if pf < 1:
                pf = 1
            if pf <= self.knd:  # the predicted completion ends the current run
                base, extra = (self.end if pf == self.k else self.t0 + self.run_time(pf)), 0.0
            else:
                extra = pf * step
        self.wbase, self.wextra, self.wstep, self.wver = base, extra, step, self.ver

    def run_time(self, j: int) -> float:
        """Seconds of the first j passes of the current run (as plan() times the whole run)."""
        a, b, c, d, o = self.a, self.b, self.c, self.d, self.o
        if a >= c and b >= d:
            return j * (a + o) + b * j * (j - 1) / 2.0
        return run_seconds(a, b, c, o, j, d)

    # -- failures -------------------------------------------------------------------------------------
    def fail(self, t: float) -> tuple[list[int], int]:
        """The replica fails at t: every request on it is lost. Returns them (running ones first, in admission
        order, then the queue) and the token positions they had computed here, which are lost with them."""
        if self.k and self.end <= t:  # the run's last pass ended as it failed: that boundary happened
            self.boundary(self.end)
        if self.k:
            j = passes_within(self.a, self.b, self.c, self.o, t - self.t0, self.d)
            j = min(j, self.k - 1)
            self.advance(j, self.t0 + self.run_time(j))
            self.busy += t - self.t0  # the pass it died in was running
            self.spans.append(self.span0)
            self.spans.append(t)
        book = self.book
        running = [i for i in self.order if book.where[i] == self.rid and book.phase[i] in (PREFILL, DECODE)]
        lost_tokens = 0
        for i in running:
            computed = book.held[i] - book.rem[i] - book.cached[i]
            if book.phase[i] == DECODE:
                passes = self.steps - book.entry_step[i]
                computed += passes
                book.cost[i] += self.cum_u - book.entry_u[i]
            lost_tokens += max(computed, 0)
            book.pfin[i] = -1
        queued = list(self.wait)
        self.loads[self.pool] -= len(running) + len(queued)
        self.queues[self.pool] -= len(queued)
        for i in queued:
            book.wait[i] += t - book.enq[i]
        self.dec, self.pdec, self.pre, self.order, self.fresh, self.chunks = [], [], [], [], [], []
        self.wait = deque()
        self.kv_res = self.kv_read = self.n_run = self.queued_pred = 0
        self.k = self.knd = 0
        self.tokens = self.left = 0
        self.open = self.cutting = False
        self.ver += 1  # the pending run end is void
        self.wver = -1
        self.down = True
        return running + queued, lost_tokens

    def repair(self, t: float) -> None:
        """Back in service at t: start on what queued while it was down."""
        self.down = False
        self.ver += 1
        if self.wait:
            self.span0 = self.t0 = t
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
