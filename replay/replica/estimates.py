"""What routers read of a replica: a request's predicted TTFT and e2e if it joined now, and the wait for admission.

Routers know no request's true output length: a decoding sequence is predicted to finish when its predicted
output length is reached (`predicted_done`, at least one more pass once that is overdue), and a waiting request
to need its predicted length (`queued_pred`). The true lengths (`decoding`, the book's `todo`) only decide when a
sequence really finishes. Every pass time here is the step model's (replay/step.py), on the batch the request
would join: its vision encoder on the images it carries, its prompt chunks with the running decoders, then its
decode passes at half its predicted output.
"""

from __future__ import annotations

from replay.replica.events import Events


class Replica(Events):
    """One continuously batching replica: its state (state.py), scheduling (schedule.py), events (events.py) and
    the estimates routers read."""

    __slots__ = ()

    def predict(self, i: int, t: float) -> tuple[float, float]:
        """Predicted TTFT and e2e of request i if it joined this replica's queue now."""
        if self.down:  # it starts when the replica is back, as an idle one with this queue
            return self.predict_down(i, t)
        book, step = self.book, self.step
        n_d = len(self.decoding)
        h = book.held[i]
        todo = book.pleft[i]  # predicted, never the true length
        if not self.queue and self.running < self.max_concurrency and self.kv_held + h + n_d + 1 <= self.kv_capacity:
            mem, comp = self.mem_s, self.compute_s
            # half the running pass, and under asynchronous scheduling the next one, composed before it came
            w = (1.5 if self.ahead else 0.5) * ((mem if mem > comp else comp) + self.fixed_s) if self.run_passes \
                else 0.0
        else:
            w = self.wait_estimate(t)
        p = book.rem[i]
        cache, ids = self.cache, book.blocks[i]
        if cache is not None and p > 0 and ids:  # the prefix this replica would reuse, as its KV events told
            p -= cache.hit(ids, book.btok[i], book.ins[i])
        kv = self.kv_read + h - p
        first = self.prefill_first  # its prompt runs in passes of prompts alone, with the whole budget
        left = (self.budget if first else self.budget - n_d) or 1
        chunk = p if p < left else left
        seqs = self.running + 1
        attends = step.s_per_ctx != 0.0
        ctx = float(self.kv_read) if attends else 0.0
        # each estimate is one pass of the step model's line, at j = 0: max(memory, compute) + fixed
        if p > 0 and first:
            own = h - p + p / 2.0  # its own prefix, half computed on average
            mem, _, comp, _, fixed = step.line(1, chunk, 0, own, chunk * own)
            ttft = w + -(-p // chunk) * ((mem if mem > comp else comp) + fixed)
        elif p > 0:
            mem, _, comp, _, fixed = step.line(seqs, n_d + chunk, n_d, kv + p / 2.0, ctx + chunk * p / 2.0)
            ttft = w + -(-p // chunk) * ((mem if mem > comp else comp) + fixed)
        else:
            mem, _, comp, _, fixed = step.line(seqs, n_d + 1, n_d + 1, kv, ctx)
            ttft = w + (mem if mem > comp else comp) + fixed
        if p > 0 and book.patches[i] and self.s_per_patch:  # its images, encoded before its first chunk
            ttft += book.patches[i] * self.s_per_patch
        if todo <= 1:
            return ttft, ttft
        kv_mid = kv + p + todo / 2.0  # its decode passes, with the running decoders, at half its predicted output
        mem, _, comp, _, fixed = step.line(seqs, n_d + 1, n_d + 1, kv_mid, kv_mid if attends else 0.0)
        return ttft, ttft + (todo - 1) * ((mem if mem > comp else comp) + fixed)

    def predict_down(self, i: int, t: float) -> tuple[float, float]:
        """Predict as if repaired now and idle with the queue it holds, then add the time until the repair."""
        self.down = False
        try:
            ttft, e2e = self.predict(i, t)
        finally:
            self.down = True
        delay = self.repair_at - t if self.repair_at > t else 0.0
        return ttft + delay, e2e + delay

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
        step = ((mem if mem > comp else comp) + self.fixed_s) if self.run_passes else self.step.overhead_s
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
