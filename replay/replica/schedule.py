"""Scheduling and admission: which sequences the next run of passes computes, and when that run ends.

Every pass runs one token of each decoding sequence plus prompt chunks of admitted sequences, first come first
served, up to max_num_batched_tokens (chunked prefill). Waiting requests are admitted at a pass boundary, in
order, while fewer than max_concurrency sequences run, the pass has token budget left and the request's KV cache
(its whole prompt, plus what it already generated) fits next to the running ones; the head of the queue blocks
the rest. With the pool's `schedule: prefill_first` (SGLang) a pass computes prompt chunks alone, with the whole
budget, whenever some wait, and the decoders wait for it. When decoding would overflow the cache, the most
recently admitted sequence is preempted and later recomputed (its prompt and generated tokens prefilled again),
as vLLM does. Under asynchronous scheduling (the pool's `async_scheduling`) the scheduler composes each pass while
the one before it runs, so a request joins a pass only if it was queued when the pass before began: one arriving
during pass k joins k + 2, unless the replica is idle.

A run lasts until the first of: a decoding sequence finishing, a prompt chunk boundary, the KV cache full, or an
arrival the replica could admit (`cut`: it joins at the next pass boundary). Its passes are the step model's line
for the batch (replay/step.py), summed in closed form.
"""

from __future__ import annotations

import heapq

from replay.book import DECODE, PREFILL, WAITING
from replay.replica.state import INF, ReplicaState
from replay.step import boundary_at, run_seconds


class Scheduler(ReplicaState):
    """Chooses each run's batch, admits from the queue, preempts, and times the run with the step model."""

    __slots__ = ()

    def plan(self, t: float, gate: float = INF) -> None:
        """Choose the next run's batch at boundary t and schedule its end; only requests queued by `gate` (the
        start of the pass that just ended, under asynchronous scheduling) may join it."""
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
            blocks, cache = book.blocks, self.cache
            order = self.admitted
            admitted = 0
            while wait and n_run < mc and left > 0 and enq[wait[0]] <= gate:
                i = wait[0]
                h = held[i]
                r = rem[i]
                ids = blocks[i]
                # a prefill with prefix blocks, where a cache is kept: its blocks others reference count once
                caches = cache is not None and r > 0 and len(ids) > 0
                d = cache.charge(ids) if cache is not None and caches else 0
                if kv_res + h + d + len(dec) + 1 > cap:
                    break
                wait.popleft()
                admitted += 1
                n_run += 1
                if cache is not None and caches:
                    c, d = cache.acquire(ids, book.btok[i], book.ins[i])
                    book.holder[i] = rid
                    r = h - c
                    rem[i] = r
                    if book.first[i] != book.first[i]:  # nan: the prefill that gives its first token
                        book.cached[i] = c
                kv_res += h + d
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
        if first and not chunks:
            tokens = len(dec)  # a decode pass
        # queued after the pass before this one was composed: it joins the pass after, so this run is one pass
        late = bool(wait) and book.enq[wait[0]] > gate
        if late and tokens == 0:  # nothing to run beside: the scheduler takes it at once
            self.plan(t)
            return
        paused = first and bool(chunks)
        self.prefill_only = paused
        self.chunks, self.run_tokens, self.budget_left = chunks, tokens, left
        self.version += 1
        self.cutting = False
        if tokens == 0:
            self.run_passes = self.run_limit = 0
            self.admits = False
            self.next_at = INF  # idle now: a pending run end in the events is void by the version
            self.spans.append(self.span_start)
            self.spans.append(t)
            return
        n_d = len(dec)
        knd = 1 << 62  # what ends the run other than a sequence finishing
        enc = 0.0
        if chunks:
            i, c = chunks[0]
            # several chunks means all but the last finish their prompt this pass; one partial chunk keeps
            # taking the whole budget until its remainder fits
            knd = 1 if len(chunks) > 1 or c >= rem[i] else max(1, (rem[i] - 1) // c)
            if self.s_per_patch:  # the encoder runs on a request's images before its first chunk, in that pass
                patches = book.patches
                for i, _ in chunks:
                    if patches[i]:
                        enc += patches[i] * self.s_per_patch
                if enc:
                    knd = 1
        if late:
            knd = 1
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
        step = self.step
        context = grow = 0.0
        if step.s_per_ctx:  # attention over the context: decoders' KV, and each chunk over its computed prefix
            context = self.context(chunks, not paused)
            grow = float(n_d + (chunks[0][1] ** 2 if len(chunks) == 1 else 0))
        # each pass adds its tokens to the KV it reads, and each decoder one token to its context
        mem, mem_g, comp, comp_g, fixed = step.line(n_d + len(chunks), tokens, n_d, kv_run, context, tokens, grow)
        if enc:  # the encoder's kernels run before the pass's own: nothing of theirs hides under its memory time
            fixed += enc
        self.mem_s, self.mem_growth_s, self.compute_s, self.compute_growth_s, self.fixed_s = mem, mem_g, comp, comp_g, \
            fixed
        self.run_passes, self.run_start = k, t
        self.admits = not wait and n_run < mc and left > 0
        cache = self.cache
        if cache is not None and cache.unref_tokens:  # the run's KV, then cached blocks in what memory is left
            room = cap - self.kv_held - n_d * k
            if cache.unref_tokens > room:
                cache.evict(room if room > 0 else 0)
        self.run_end = self.next_at = end = t + run_seconds(mem, mem_g, comp, fixed, k, comp_g)
        if self.events is not None:
            heapq.heappush(self.events, (end, self.version, self.serial))

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

    def run_time(self, j: int) -> float:
        """Seconds of the first j passes of the current run."""
        return run_seconds(self.mem_s, self.mem_growth_s, self.compute_s, self.fixed_s, j, self.compute_growth_s)

    def cut(self, t: float) -> None:
        """End the current run at the first pass boundary at or after t, where the newcomer joins.

        The run is only shortened here; the boundary is handled when its event comes, so that every request
        arriving before it joins the same pass.
        """
        t0 = self.run_start
        if t <= t0 and (not self.ahead or self.span_start == t0):  # the run starts now: plan it with the newcomer
            self.plan(t0)
            return
        j, tb = boundary_at(self.mem_s, self.mem_growth_s, self.compute_s, self.fixed_s, t0, t, self.compute_growth_s)
        if self.ahead:  # the pass starting there was composed before the newcomer came: it joins the one after
            j += 1
            tb = t0 + self.run_time(j)
        if j >= self.run_passes:
            return
        self.run_passes, self.run_end = j, tb
        if j < self.run_limit:
            self.run_limit = j
        self.version += 1
        self.cutting = True
        self.next_at = tb
        if self.events is not None:
            heapq.heappush(self.events, (tb, self.version, self.serial))

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
            self.kv_held -= held + self.let_go(v)
            book.held[v] = held
        else:
            self.prefilling.remove(v)
            self.kv_held -= book.held[v] + self.let_go(v)
            self.kv_read -= book.held[v] - book.rem[v]
        book.rem[v] = book.held[v] - book.cached[v]
        book.preempted[v] += 1
        book.phase[v] = WAITING
        book.enq[v] = t
        self.running -= 1
        self.queued_pred += book.pleft[v]
        self.queues[self.pool] += 1
        self.queue.appendleft(v)
