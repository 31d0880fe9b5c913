"""The one step model: every path that times a pass (the replica's runs, what routers predict, the full-batch price,
the closed-loop bench's cycle) gives the pass time a reference written here from the formula computes, for random
batches and layouts; a path changed alone breaks it."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replay.book import Book
from replay.candidate import Candidate
from replay.costmodel import FullBatch, step_model
from replay.fleet import PoolSpec, resolve_pools
from replay.replica import Replica
from replay.step import StepModel, boundary_at, passes_within, run_seconds
from tests.replay_fleets import chip, fleet, model, pool

REL = 1e-9


@dataclass(frozen=True)
class Coefficients:
    """A replica's step coefficients, as the reference reads them."""

    pp: int
    s_per_byte: float
    s_per_token: float
    s_per_token_decode: float
    s_per_ctx: float
    kv_bytes: float
    weight_bytes: float
    dense_bytes: float
    pick: float
    overhead_s: float
    seq_overhead_s: float
    comm_s: float
    comm_s_per_token: float
    serial_share: float

    def model(self, whole: int = 0) -> StepModel:
        return StepModel(pp=self.pp, s_per_byte=self.s_per_byte, s_per_token=self.s_per_token, kv_bytes=self.kv_bytes,
                         weight_bytes=self.weight_bytes, pick=self.pick, overhead_s=self.overhead_s,
                         s_per_token_decode=self.s_per_token_decode, dense_bytes=self.dense_bytes,
                         seq_overhead_s=self.seq_overhead_s, s_per_ctx=self.s_per_ctx, comm_s=self.comm_s,
                         comm_s_per_token=self.comm_s_per_token, serial_share=self.serial_share, whole=whole)


def reference(c: Coefficients, seqs: int, tokens: int, decode: int, kv: float, context: float) -> float:
    """One pass, from costmodel.py's docstring: pp stages, m = min(pp, seqs) micro-batches; memory reads the weights a
    micro-batch touches and the KV; compute is prompt, decode and attention FLOPs; the serial share of the shorter
    is not hidden; collectives and engine time come on top."""
    m = max(1, min(c.pp, seqs))
    x = tokens / m
    touched = c.weight_bytes if c.pick >= 1.0 else c.dense_bytes + (c.weight_bytes - c.dense_bytes) * (
        1.0 - (1.0 - c.pick) ** max(x, 1.0))
    memory = c.pp * (touched + c.kv_bytes * kv / m) * c.s_per_byte
    compute = c.pp * (c.s_per_token * (tokens - decode) + c.s_per_token_decode * decode + c.s_per_ctx * context) / m
    fixed = c.overhead_s + c.seq_overhead_s * seqs + c.comm_s + c.comm_s_per_token * tokens / m
    return max(memory, compute) + c.serial_share * min(memory, compute) + fixed


def _coefficients(moe: bool, pp: int, attention: bool, terms: bool, serial: float, scale: float) -> Coefficients:
    return Coefficients(pp=pp, s_per_byte=scale / 2e12, s_per_token=scale * 4e-5, s_per_token_decode=scale * 5e-5,
                        s_per_ctx=scale * 2e-10 if attention else 0.0, kv_bytes=163_840.0, weight_bytes=1.4e11,
                        dense_bytes=2.0e10 if moe else 0.0, pick=8 / 128 if moe else 1.0, overhead_s=3e-3 * scale,
                        seq_overhead_s=4e-5 if terms else 0.0, comm_s=1e-3 if terms else 0.0,
                        comm_s_per_token=2e-7 if terms else 0.0, serial_share=serial)


layouts = st.builds(_coefficients, moe=st.booleans(), pp=st.sampled_from([1, 1, 2, 4]), attention=st.booleans(),
                    terms=st.booleans(), serial=st.sampled_from([0.0, 0.0, 0.3, 1.0]),
                    scale=st.floats(0.5, 2.0))


@st.composite
def batches(draw: st.DrawFn) -> tuple[int, int, int, float, float]:
    decode = draw(st.integers(0, 256))
    chunks = draw(st.integers(0 if decode else 1, 3))
    prompt = draw(st.integers(chunks, 8192)) if chunks else 0
    kv = float(draw(st.integers(0, 2_000_000)))
    context = float(draw(st.integers(0, 50_000_000)))
    return decode + chunks, decode + prompt, decode, kv, context


@settings(max_examples=300, deadline=None)
@given(layouts, batches(), st.integers(0, 2_000), st.integers(0, 2_000_000), st.integers(1, 40))
def test_a_pass_and_a_run_of_passes_are_the_reference(c: Coefficients, batch: tuple[int, int, int, float, float],
                                                      kv_growth: int, ctx_growth: int, k: int) -> None:
    seqs, tokens, decode, kv, context = batch
    step = c.model(whole=tokens + 8)
    assert step.pass_seconds(seqs, tokens, kv, decode, context) == pytest.approx(
        reference(c, seqs, tokens, decode, kv, context), rel=REL)
    a, b, cc, d, o = step.line(seqs, tokens, decode, kv, context, kv_growth, ctx_growth)
    passes = [reference(c, seqs, tokens, decode, kv + j * kv_growth, context + j * ctx_growth) for j in range(k)]
    for j, want in enumerate(passes):  # pass j of the run, as the line gives it
        assert max(a + b * j, cc + d * j) + o == pytest.approx(want, rel=REL)
    total = sum(passes)
    assert run_seconds(a, b, cc, o, k, d) == pytest.approx(total, rel=REL)
    assert passes_within(a, b, cc, o, total * (1 + 1e-12), d) == k
    j, at = boundary_at(a, b, cc, o, 10.0, 10.0 + total - passes[-1] / 2, d)  # half-way through the last pass
    assert j == k and at == pytest.approx(10.0 + total, rel=REL)


def _replica(c: Coefficients, *, max_concurrency: int = 512, budget: int = 16_384, kv_capacity: int = 10**9,
             n: int = 300) -> Replica:
    step = c.model(whole=budget + max_concurrency)
    return Replica(0, 0, 0, step, max_concurrency=max_concurrency, budget=budget, kv_capacity=kv_capacity,
                   rate=1.0, book=Book(n, [0] * n), loads=[0], queues=[0])


def _running(rep: Replica, decoders: int, context: int) -> float:
    """`decoders` sequences of `context` tokens decoding, of different lengths, run until the first finishes; returns
    when that boundary is (the replica's state is then read, not predicted)."""
    for i in range(decoders):  # admitted at once as decode-only sequences (no prompt left to compute)
        rep.book.load(i, 0, context, 3 + i, 3 + i)
        rep.arrive(i, 0.0)
    if decoders:
        rep.boundary(rep.next_at)
    return rep.run_start


@settings(max_examples=150, deadline=None)
@given(layouts, st.integers(0, 64), st.integers(1, 4000), st.integers(1, 3000))
def test_the_replicas_run_is_the_reference(c: Coefficients, decoders: int, prompt: int, context: int) -> None:
    """A newcomer's prompt is chunked in beside running decoders: the run the replica plans passes as the reference
    says, its first pass and the next (which reads the first's tokens too)."""
    rep = _replica(c, budget=600)  # a prompt longer than what a pass leaves it is chunked over several passes
    t = _running(rep, decoders, context)
    new = 299
    rep.book.load(new, prompt, prompt, 50, 50)
    rep.arrive(new, t)  # at the boundary: the run is planned again with it
    n_d, kv = len(rep.decoding), float(rep.kv_read)
    chunk = min(prompt, rep.budget - n_d)
    ctx = (kv if c.s_per_ctx else 0.0) + chunk * chunk / 2.0
    assert rep.run_time(1) == pytest.approx(reference(c, n_d + 1, n_d + chunk, n_d, kv, ctx), rel=REL)
    if rep.run_passes > 1:
        grow = n_d + chunk * chunk if c.s_per_ctx else 0.0
        second = reference(c, n_d + 1, n_d + chunk, n_d, kv + n_d + chunk, ctx + grow)
        assert rep.run_time(2) - rep.run_time(1) == pytest.approx(second, rel=REL)


@settings(max_examples=150, deadline=None)
@given(layouts, st.integers(0, 32), st.integers(1, 6000), st.integers(1, 2000), st.booleans())
def test_what_routers_read_is_the_reference(c: Coefficients, decoders: int, prompt: int, predicted: int,
                                            first: bool) -> None:
    """predict() times the request's prompt passes beside the running decoders (at half its prompt computed) and its
    decode passes (at half its predicted output) with the reference's pass, under either schedule."""
    rep = _replica(c)
    rep.prefill_first = first
    t = _running(rep, decoders, 1000)
    new = 299
    rep.book.load(new, prompt, prompt, 10**6, predicted)
    ttft, e2e = rep.predict(new, t)
    n_d, kv = len(rep.decoding), float(rep.kv_read)
    wait = 0.5 * (max(rep.mem_s, rep.compute_s) + rep.fixed_s) if rep.run_passes else 0.0
    chunk = min(prompt, rep.budget if first else rep.budget - n_d)
    passes = math.ceil(prompt / chunk)
    attends = c.s_per_ctx > 0
    if first:
        own = prompt / 2.0
        want = wait + passes * reference(c, 1, chunk, 0, own, chunk * own)
    else:
        want = wait + passes * reference(c, rep.running + 1, n_d + chunk, n_d, kv + prompt / 2.0,
                                         (kv if attends else 0.0) + chunk * prompt / 2.0)
    assert ttft == pytest.approx(want, rel=REL)
    mid = kv + prompt + predicted / 2.0
    decode = reference(c, rep.running + 1, n_d + 1, n_d + 1, mid, mid if attends else 0.0)
    assert e2e - ttft == pytest.approx((predicted - 1) * decode, rel=REL, abs=1e-12)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from([1, 2]), st.sampled_from([0.0, 0.4]), st.sampled_from([0.0, 30.0]), st.booleans(),
       st.integers(1, 256), st.lists(st.integers(1, 30_000), min_size=1, max_size=5))
def test_the_full_batch_price_is_the_reference(pp: int, serial: float, seq_us: float, shaped: bool, full: int,
                                               contexts: list[int]) -> None:
    """What policies rank pools by: prompt tokens pay their compute, and each output token 1/full of a pass of `full`
    decoders at its mean context, with the pool's own step coefficients."""
    spec = _pool(pp, serial, seq_us, shaped, full)
    s = step_model(spec)
    c = Coefficients(**{f: getattr(s, f) for f in Coefficients.__dataclass_fields__})
    ins = np.array(contexts, dtype=np.float64)
    outs = np.full(len(contexts), 100.0)
    got = FullBatch((spec,)).costs(ins, np.zeros(len(contexts)), outs)[0]
    for k, x in enumerate(ins + outs / 2.0):
        per_token = reference(c, full, full, full, full * x, full * x) / full
        prefill = ins[k] * (c.s_per_token + c.s_per_ctx * ins[k] / 2.0)
        assert got[k] == pytest.approx((prefill + 100.0 * per_token) * spec.replica_cost_per_s, rel=REL)


def _pool(pp: int, serial: float, seq_us: float, shaped: bool, full: int) -> PoolSpec:
    """A two-device pool at `full` sequences, its model's shape declared (collectives, attention) when `shaped`."""
    p = pool("p", dpr=2, concurrency=full)
    assert p.serving is not None
    p = dataclasses.replace(p, serving=dataclasses.replace(p.serving, pp=pp, seq_overhead_us=seq_us,
                                                           max_num_batched_tokens=max(2048, full)),
                            cost_model=dataclasses.replace(p.cost_model, serial_share=serial))
    m = model(params_b=70.0, active_b=12.0) if shaped else model()
    if shaped:
        m = dataclasses.replace(m, hidden_size=8192, attention_heads=64, layers=80)
    return resolve_pools(fleet(p, chips=(chip(link_gbps=450.0),), models=(m,)), Candidate(name="c"))[0]
