"""The replica's events: an arrival, the end of a run of passes, a sequence finishing, a failure and a repair.

Between two events the batch does not change, so a run of passes is accounted for at once when it ends
(`advance`): the KV it wrote, the busy time and cost it shared among its tokens, the prompt chunks it computed and
the first tokens it gave. A sequence's first token ends the pass that computes its last prompt chunk. Under
`prefill_first` a pass of prompts alone does not advance the decoders: `steps` counts the passes they ran, so the
heaps keyed by it stay valid across such passes.
"""

from __future__ import annotations

import heapq
from collections import deque

from replay.book import DECODE, DONE, PREFILL, WAITING
from replay.replica.schedule import Scheduler
from replay.replica.state import INF, KV_BINS
from replay.step import passes_within, run_seconds


class Events(Scheduler):
    """Moves a replica from event to event: what each event changes, and the next run it plans."""

    __slots__ = ()

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

    def advance(self, j: int, t: float) -> None:
        """Account for the first j passes of the current run, ending at t."""
        if j <= 0:
            return
        book = self.book
        dur = t - self.run_start
        paused = self.prefill_only  # prompts alone: the decoders neither advance nor share the cost
        n_d = 0 if paused else len(self.decoding)
        self.wait_version = -1  # the run is being settled: what routers read is recomputed
        mean_held = self.kv_held + n_d * (j - 1) / 2.0
        self.kv_time += mean_held * dur
        if self.kv_capacity > 0:
            self.kv_hist[min(int(mean_held * KV_BINS / self.kv_capacity), KV_BINS)] += dur
        if not paused:
            self.steps += j  # passes the decoders ran: their heap keys count these
        self.kv_held += n_d * j
        if self.kv_held > self.kv_peak:  # the KV held only grows within a run: its end is its peak
            self.kv_peak = self.kv_held
        tokens = self.run_tokens
        self.kv_read += tokens * j
        self.busy += dur
        u = dur * self.cost_rate / tokens
        if not paused:
            self.cost_sum += u
        if self.chunks:
            rem, cost, patches = book.rem, book.cost, book.patches
            for i, c in self.chunks:
                rem[i] -= c * j
                cost[i] += c * u
                if patches[i] and self.s_per_patch:  # its images were encoded in this run's (one) pass
                    book.enc[i] += patches[i] * self.s_per_patch
                    patches[i] = 0
        if self.fresh and not paused:
            first_token = self.run_start + run_seconds(self.mem_s, self.mem_growth_s, self.compute_s, self.fixed_s, 1,
                                                       self.compute_growth_s)
            ft = book.first
            for i in self.fresh:
                if ft[i] != ft[i]:  # nan: no token yet
                    ft[i] = first_token
            self.fresh = []
        self.run_start = t

    def boundary(self, t: float) -> None:
        """The current run ended at t (its last pass finished): account for it, finish sequences, turn completed
        prefills into decoders, admit, plan."""
        book = self.book
        # under asynchronous scheduling the next pass was composed when the last one began
        gate = self.run_start + self.run_time(self.run_passes - 1) if self.ahead else INF
        self.advance(self.run_passes, t)
        dec, steps, nkey = self.decoding, self.steps, self.key_stride
        due = (steps + 1) * nkey  # the keys of sequences finishing by this pass count
        if dec and dec[0] < due:
            if self.on_done is None:  # nothing outside this replica runs meanwhile: one sweep, counters summed
                held, cost, phase, done, pfin = book.held, book.cost, book.phase, book.done, book.pfin
                entry_step, entry_u, completions = book.entry_step, book.entry_u, self.completions
                cum_u = self.cost_sum
                pop = heapq.heappop
                freed = n = shared = 0
                holder, rid = book.holder, self.serial
                while dec and dec[0] < due:
                    i = pop(dec) % nkey
                    freed += held[i] + steps - entry_step[i]
                    if holder[i] == rid:
                        shared += self.let_go(i)
                    cost[i] += cum_u - entry_u[i]
                    n += 1
                    phase[i] = DONE
                    done[i] = t
                    pfin[i] = -1
                    if completions is not None:
                        completions.append(i)
                self.kv_read -= freed
                self.kv_held -= freed + shared
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
                    book.wfirst[i] = book.wait[i]
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
        self.plan(t, gate)

    def finish(self, i: int, t: float, *, decoded: bool) -> None:
        """Request i has generated all its tokens at t."""
        book = self.book
        held = book.held[i]
        if decoded:
            held += self.steps - book.entry_step[i]
            book.cost[i] += self.cost_sum - book.entry_u[i]
        self.kv_read -= held
        self.kv_held -= held + self.let_go(i)
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
            if book.holder[i] == self.serial:
                book.holder[i] = -1
        queued = list(self.queue)
        self.loads[self.pool] -= len(running) + len(queued)
        self.queues[self.pool] -= len(queued)
        for i in queued:
            book.wait[i] += t - book.enq[i]
        if self.cache is not None:  # its KV memory, and the blocks in it, are lost
            self.cache.clear()
        self.decoding, self.predicted_done, self.prefilling, self.admitted = [], [], [], []
        self.fresh, self.chunks = [], []
        self.queue = deque()
        self.kv_held = self.kv_read = self.running = self.queued_pred = 0
        self.run_passes = self.run_limit = 0
        self.run_tokens = self.budget_left = 0
        self.admits = self.cutting = False
        self.version += 1
        self.next_at = INF  # the pending run end is void, by the version
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
