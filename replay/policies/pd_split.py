"""pd_split: prefill on one pool, decode on another, with the KV cache moved over the interconnect between.

Options: `prefill: [pool ids]` and `decode: [pool ids]`, each tried cheapest first (by the request's cost at
full batches, costmodel.full_batch_cost). At arrival the request goes to the first prefill pool predicted to
meet its TTFT limit. When its prefill ends (the first token is out), it is given the first decode pool serving
the same model that is predicted (transfer, then its decode on the replica it would join) to meet the e2e
limit; if none is, the one predicted to finish first. The transfer takes in_tokens x KV bytes per token over
the slower side's interconnect (devices of a replica send their shards in parallel). The prefill replica
frees the sequence when its prefill ends; the decode replica admits it, with its KV cache and no prompt to
compute, once the cache has landed. Both pools must fit the request's whole context. A request whose model no
prefill pool serves is served whole, at arrival, on the cheapest pool that serves it and has queue room.

With `encode: [pool ids]` the images are encoded apart (encode-prefill-decode, as vLLM's and SGLang's disaggregated
encoders run them). A request that carries images and whose model an encode pool serves goes first to the encode
replica that would finish its images soonest (the gateway sees each encoder's queue): there the vision encoder runs
on one request's images at a time, compute-bound, so batching would not shorten it, at the replica's seconds per
patch (replay/encode.py). When its images are encoded the request is routed to a prefill pool as above, with the
time already spent and the embeddings' transfer counted against its TTFT limit; the embeddings (image tokens x the
language model's hidden size x 2 B) then cross the slower side's interconnect, and the prefill replica computes the
prompt without encoding again. An encode pool serves nothing else: it must not be a prefill or decode pool, and
its model must have a vision encoder. Its busy seconds are the encoders' work, priced into each request's cost.
"""

from __future__ import annotations

from replay import costmodel
from replay.exceptions import ReplayError
from replay.plan import Plan
from replay.policies.base import State
from replay.replica.estimates import Replica


def _indices(plan: Plan, ids: tuple[str, ...], role: str) -> list[int]:
    index = {p.id: k for k, p in enumerate(plan.pools)}
    missing = [i for i in ids if i not in index]
    if missing:
        raise ReplayError(f"pd_split {role} pool {', '.join(repr(m) for m in missing)} is disabled or does "
                          f"not serve; serving: {', '.join(index)}")
    return [index[i] for i in ids]


class PdSplit:
    """Disaggregated prefill and decode across pools."""

    name = "pd_split"
    sla_aware = True
    split = True

    def check_options(self, options: dict[str, tuple[str, ...]]) -> list[str]:
        """Both stage lists are required and non-empty, an encode list is optional and its pools serve no other
        stage, and nothing else is taken."""
        unknown = [f"policy 'pd_split' has no option '{k}'; options: {', '.join(STAGES)}"
                   for k in options if k not in STAGES]
        both = [p for p in options.get("encode", ()) if p in options.get("prefill", ()) + options.get("decode", ())]
        return unknown + [f"policy 'pd_split' needs a non-empty '{k}' list of pool ids"
                          for k in ("prefill", "decode") if not options.get(k)] + [
            f"policy 'pd_split' encode pool '{p}' is also a prefill or decode pool; an encode pool runs only the "
            f"vision encoder" for p in both]

    def router(self, plan: Plan, state: State, options: dict[str, tuple[str, ...]]) -> _Router:
        """Bind the stage lists to the run's pools."""
        encoders = _indices(plan, options.get("encode", ()), "encode")
        for e in encoders:
            if plan.pools[e].model.vision is None:
                raise ReplayError(f"pd_split encode pool '{plan.pools[e].id}' serves model "
                                  f"'{plan.pools[e].model.id}', which has no vision encoder (no 'vision' in the "
                                  f"registry)")
        return _Router(plan, state, _indices(plan, options.get("prefill", ()), "prefill"),
                       _indices(plan, options.get("decode", ()), "decode"),
                       _Encoders(plan, state, encoders) if encoders and plan.patches else None)


class _Encoders:
    """The encode stage: each replica of an encode pool runs one request's images at a time, in arrival order."""

    def __init__(self, plan: Plan, state: State, pools: list[int]) -> None:
        self.state, self.pools = state, pools
        self.model = [p.model.id for p in plan.pools]
        self.models: list[str] = [str(m) for m in plan.models]
        self.rate = [p.replica_cost_per_s for p in plan.pools]
        self.free = [[0.0] * p.replicas for p in plan.pools]  # per pool and replica: when its encoder is free
        self.patches: list[int] = list(plan.patches)
        self.tokens: list[int] = [int(x) for x in plan.image_tokens]
        # per pool pair: seconds per image token of embeddings from the first to the second
        self.per_token = [[costmodel.embedding_transfer_seconds(1.0, a, b) for b in plan.pools] for a in plan.pools]
        self.by = [-1] * plan.n  # per request: the encode pool that encoded its images, -1 none

    def take(self, i: int, t: float) -> float:
        """Queue request i's images at t on the encode replica that finishes them soonest; when they are done, or
        -1 when no encode pool serves its model. Books the encoder's seconds, its queue and its cost."""
        model, patches = self.models[i], self.patches[i]
        best, bk, start, done = -1, -1, 0.0, float("inf")
        for e in self.pools:
            if model and self.model[e] != model:  # a request naming no model may take any
                continue
            for k, rep in enumerate(self.state.replicas[e]):
                s = max(t, self.free[e][k])
                end = s + patches * rep.s_per_patch
                if end < done:
                    best, bk, start, done = e, k, s, end
        if best < 0:
            return -1.0
        rep = self.state.replicas[best][bk]
        self.free[best][bk] = done
        spans = rep.spans
        if spans and spans[-1] >= start:  # back to back with the last: one busy span
            spans[-1] = done
        else:
            spans.append(start)
            spans.append(done)
        book = rep.book
        book.wait[i] += start - t
        book.enc[i] += done - start
        book.cost[i] += (done - start) * self.rate[best]
        book.patches[i] = 0  # the prefill replica does not encode them again
        self.by[i] = best
        return done

    def delay(self, i: int, p: int) -> float:
        """Seconds request i's image embeddings take from their encoder to prefill pool p; 0 when encoded there."""
        e = self.by[i]
        return self.tokens[i] * self.per_token[e][p] if e >= 0 else 0.0


class _Router:
    def __init__(self, plan: Plan, state: State, prefill: list[int], decode: list[int],
                 encoders: _Encoders | None = None) -> None:
        self.state, self.plan = state, plan
        self.prefill, self.decode = prefill, decode
        self.encoders = encoders
        self.arrival: list[float] = plan.arrival_list
        self.feasible = plan.feasible_rows
        self.ttft, self.e2e = plan.ttft_list, plan.e2e_list
        self.cost = plan.rank_cost
        pools = plan.pools
        self.rate = [[costmodel.kv_transfer_seconds(1.0, a, b) for b in pools] for a in pools]
        self.same_model = [[a.model.id == b.model.id for b in pools] for a in pools]
        self.in_tokens = plan.in_list

    def splits(self, p: int) -> bool:
        return p in self.prefill

    def serves(self, p: int) -> bool:
        """Whether pool p takes requests (an encode pool runs only the encoder)."""
        return self.encoders is None or p not in self.encoders.pools

    def encode(self, i: int, t: float) -> float:
        """Send request i's images, at its arrival t, to the encode stage: when they are encoded, or -1 when they
        are encoded on the replica that prefills it (no encode pool, or no prefill pool, serves its model)."""
        enc = self.encoders
        if enc is None or not any(self.feasible[i][p] for p in self.prefill):
            return -1.0
        return enc.take(i, t)

    def embedding_delay(self, i: int, p: int) -> float:
        """Seconds request i's image embeddings take from their encode pool to pool p (0: not encoded apart)."""
        return self.encoders.delay(i, p) if self.encoders is not None else 0.0

    def route(self, i: int, t: float) -> Replica | None:
        state, ok = self.state, self.feasible[i]
        if not any(ok[p] for p in self.prefill):
            for p in self.plan.orders[self.plan.code[i]]:
                if not self.serves(p):
                    continue
                r = state.pick(p, t)
                if state.has_room(p, r, t):
                    return r
            return None
        # encoded apart: the time since arrival and the embeddings' way here count against the TTFT limit
        spent = t - self.arrival[i] if self.encoders is not None and self.encoders.by[i] >= 0 else -1.0
        for p in sorted(self.prefill, key=lambda q: self.cost[q, i]):
            if not ok[p]:
                continue
            r = state.pick(p, t)
            ttft, _ = r.predict(i, t)
            if spent >= 0:
                ttft += spent + self.embedding_delay(i, p)
            if ttft <= self.ttft[i] and state.has_room(p, r, t):
                return r
        return None

    def decode_pool(self, i: int, p: int, t: float) -> tuple[int, bool]:
        state, ok = self.state, self.feasible[i]
        elapsed = t - float(self.plan.arrival[i])
        fallback, soonest = -1, float("inf")
        for d in sorted(self.decode, key=lambda q: self.cost[q, i]):
            if not (ok[d] and self.same_model[p][d]):
                continue
            transfer = self.in_tokens[i] * self.rate[p][d]
            r = state.pick(d, t + transfer)
            _, e2e = r.predict(i, t + transfer)
            finish = transfer + e2e
            if finish < soonest:
                fallback, soonest = d, finish
            if elapsed + finish <= self.e2e[i] and state.has_room(d, r, t):
                return d, True
        return fallback, False

    def transfer_seconds(self, i: int, p: int, d: int) -> float:
        """KV transfer time of request i from prefill pool p to decode pool d."""
        return self.in_tokens[i] * self.rate[p][d]


STAGES = ("prefill", "decode", "encode")
POLICY = PdSplit()
