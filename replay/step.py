"""The one step model: what a pass of a continuously batching replica costs, and runs of passes summed in closed form.

A pass runs `seqs` sequences that compute `tokens` tokens (`decode` of them one token of a decoding sequence, the
rest prompt chunks), reading `kv` tokens of KV cache, with `context` token x context products of attention. With
m = min(pp, seqs) micro-batches in flight over pp pipeline stages:

    memory  = pp x (weight bytes the micro-batch's tokens read + KV bytes x kv / m) x seconds per byte
    compute = pp / m x (s_per_token x prompt tokens + s_per_token_decode x decode + s_per_ctx x context)
    fixed   = step overhead + seq overhead x seqs + chunk overhead x (seqs - decode) + collectives
              + collectives per token x tokens / m
    pass    = max(memory, compute) + serial_share x min(memory, compute) + fixed + experts

A mixture of experts with declared expert counts runs its routed experts as kernels of their own (a grouped GEMM
between each layer's attention and its next), each expert on the x k / E of a micro-batch's x tokens routed to it.
Its arithmetic intensity is that share, not x: the experts stay under the ridge point (bandwidth-bound) for any
batch short of E / k times the ridge, while attention and the dense part beside them are already compute-bound,
and one kernel's bytes do not hide under another's FLOPs. So the routed experts take their own roofline, outside
the pass's other memory and compute:

    experts = max(M_e, C_e) + serial_share x min(M_e, C_e)
    M_e     = pp x bytes of the experts a micro-batch's tokens touch x seconds per byte
    C_e     = pp / m x routed x (s_per_token x prompt tokens + s_per_token_decode x decode)

with `routed` the share of a token's matmul FLOPs in its k routed experts (k x expert / active parameters);
memory and compute above then count only the dense part's weights and the other (1 - routed) of the FLOPs.

Between two events a batch does not change, only its KV and context grow by the tokens each pass adds, so pass j
of a run takes max(a + b j, c + d j) + o (o: the fixed part and the routed experts, neither of which grows within
a run): `line` gives (a, b, c, d, o) with the serial share folded in
(max(M, C) + u min(M, C) = max(M + u C, C + u M) for u <= 1), `run_seconds` sums k such passes and
`passes_within` inverts that sum. Every path that times a pass (the replica's runs, what routers predict, the
closed-loop bench, the planner, calibration) goes through `line`; replay/costmodel.py derives the coefficients
from a pool's chip, model and engine (`costmodel.step_model`).

This module imports only `math`, so that it can be compiled with the replica (replay/native.py).
"""

from __future__ import annotations

import math

Line = tuple[float, float, float, float, float]


class StepModel:
    """The coefficients of one replica's pass time (see the module docstring), and the pass and run times."""

    __slots__ = ("chunk_overhead_s", "comm_s", "comm_s_per_token", "dense", "dense_bytes", "fixed_s", "kv_bytes",
                 "overhead_s", "pick", "pp", "routed", "s_per_byte", "s_per_ctx", "s_per_token",
                 "s_per_token_decode", "seq_overhead_s", "serial_share", "weight_bytes", "weight_memo", "weight_whole")

    def __init__(self, *, pp: int, s_per_byte: float, s_per_token: float, kv_bytes: float, weight_bytes: float,
                 pick: float, overhead_s: float, s_per_token_decode: float = 0.0, dense_bytes: float = 0.0,
                 seq_overhead_s: float = 0.0, s_per_ctx: float = 0.0, comm_s: float = 0.0,
                 comm_s_per_token: float = 0.0, serial_share: float = 0.0, whole: int = 0,
                 chunk_overhead_s: float = 0.0, routed: float = 0.0) -> None:
        self.pp: int = int(pp)
        self.s_per_byte: float = float(s_per_byte)            # seconds to read a byte at sustained bandwidth
        self.s_per_token: float = float(s_per_token)          # compute per prompt token at sustained FLOP/s
        self.s_per_token_decode: float = float(s_per_token_decode or s_per_token)  # per decode token
        self.s_per_ctx: float = float(s_per_ctx)              # attention per token x context token
        self.kv_bytes: float = float(kv_bytes)                # KV cache bytes per token
        self.weight_bytes: float = float(weight_bytes)        # all weights
        self.dense_bytes: float = float(dense_bytes)          # weights every token reads whatever experts it picks
        self.pick: float = float(pick)                        # chance a token picks a given expert (1: dense)
        self.dense: bool = self.pick >= 1.0
        self.overhead_s: float = float(overhead_s)            # engine time per step
        self.seq_overhead_s: float = float(seq_overhead_s)    # engine time per running sequence per step
        self.chunk_overhead_s: float = float(chunk_overhead_s)  # engine time per prompt chunk of a step
        self.comm_s: float = float(comm_s)                    # collectives' fixed time per pass
        self.fixed_s: float = self.overhead_s + self.comm_s   # what every pass pays, whatever its batch
        self.comm_s_per_token: float = float(comm_s_per_token)  # collectives' time per token of a micro-batch
        self.serial_share: float = float(serial_share)        # of the shorter of memory and compute, not hidden
        # share of a token's matmul FLOPs in its routed experts, timed on their own roofline (0: one roofline)
        self.routed: float = 0.0 if self.dense else float(routed)
        # a MoE pass's weight bytes by token count, remembered: whole counts up to `whole` in a list (-1: not yet)
        self.weight_memo: dict[float, float] = {}
        self.weight_whole: list[float] = [] if self.dense else [-1.0] * (whole + 2)

    def weights(self, tokens: float) -> float:
        """Weight bytes one micro-batch of `tokens` tokens reads: all of a dense model's, and of a mixture of
        experts its dense part and the experts its tokens touch, E x (1 - (1 - k / E)^x) of E."""
        if self.dense:
            return self.weight_bytes
        k = int(tokens)
        memo = self.weight_whole
        if k == tokens and 0 <= k < len(memo):
            w = memo[k]
            if w < 0.0:
                w = memo[k] = self._touched(tokens)
            return w
        found = self.weight_memo.get(tokens)
        if found is None:
            found = self.weight_memo[tokens] = self._touched(tokens)
        return found

    def _touched(self, tokens: float) -> float:
        return self.dense_bytes + (self.weight_bytes - self.dense_bytes) * (
            1.0 - (1.0 - self.pick) ** (tokens if tokens > 1.0 else 1.0))

    def line(self, seqs: int, tokens: int, decode: int, kv: float, context: float, kv_growth: float = 0.0,
             context_growth: float = 0.0) -> Line:
        """(a, b, c, d, o): pass j of a run of this batch takes max(a + b j, c + d j) + o while its KV grows by
        `kv_growth` tokens and its context products by `context_growth` a pass."""
        pp = self.pp
        if pp == 1:  # one stage: one micro-batch, and the stages' factor pp / m is exactly 1
            m, share = 1, 1.0
        else:  # m = min(pp, seqs) micro-batches in flight
            m = pp if pp < seqs else (seqs if seqs > 0 else 1)
            share = pp / m
        if self.dense:
            w = self.weight_bytes
        else:  # weights(), its remembered whole counts read here first: a MoE pool asks at every pass
            x = tokens / m
            memo = self.weight_whole
            k = int(x)
            w = memo[k] if k == x and k < len(memo) else -1.0
            if w < 0.0:
                w = self.weights(x)
        spb, kvb, ctx = self.s_per_byte, self.kv_bytes, self.s_per_ctx
        mm = self.s_per_token * (tokens - decode) + self.s_per_token_decode * decode
        o = (self.fixed_s + self.seq_overhead_s * seqs + self.chunk_overhead_s * (seqs - decode)
             + self.comm_s_per_token * tokens / m)
        u = self.serial_share
        r = self.routed
        if r > 0.0:  # the routed experts on their own roofline (module docstring); the rest reads the dense part
            me = (w - self.dense_bytes) * m * spb * share
            ce = r * mm * share
            o += me + u * ce if me > ce else ce + u * me
            w = self.dense_bytes
            mm -= r * mm
        a = (w * m + kvb * kv) * spb * share
        b = kvb * kv_growth * spb * share
        c = (mm + ctx * context) * share
        d = ctx * context_growth * share
        if u:
            return a + u * c, b + u * d, c + u * a, d + u * b, o
        return a, b, c, d, o

    def pass_seconds(self, seqs: int, tokens: int, kv_tokens: float, decode_tokens: int = 0,
                     context: float = 0.0) -> float:
        """One pass of `seqs` sequences computing `tokens` tokens (`decode_tokens` of them decoding), reading
        `kv_tokens` of KV, with `context` token x context products of attention."""
        a, _, c, _, o = self.line(seqs, tokens, decode_tokens, kv_tokens, context)
        return (a if a > c else c) + o

    def fixed_seconds(self, seqs: int, tokens: int) -> float:
        """What a pass adds beyond memory and compute: collectives, the engine's time per step and sequence, and
        a MoE model's routed experts on their own roofline."""
        return self.line(seqs, tokens, 0, 0.0, 0.0)[4]

    def weight_bytes_read(self, tokens: float) -> float:
        """Weight bytes one micro-batch of `tokens` tokens reads (the name the cost model's readers know)."""
        return self.weights(tokens)


def _phases(a: float, b: float, c: float, d: float) -> tuple[float, float, float, float, float]:
    """(s, p1, q1, p2, q2): passes j < s of a run follow p1 + q1 j, the later ones p2 + q2 j, where pass j
    takes max(a + b j, c + d j) (memory, compute) without its fixed part."""
    if b > d:  # memory grows faster: compute-bound first, if at all
        if a >= c:
            return 0.0, c, d, a, b
        q = (c - a) / (b - d)
        return (math.inf if q > 1e15 else float(math.ceil(q))), c, d, a, b
    if b < d:  # compute grows faster: memory-bound first, if at all
        if a < c:
            return 0.0, a, b, c, d
        q = (a - c) / (d - b)
        return (math.inf if q > 1e15 else float(math.floor(q) + 1)), a, b, c, d
    return (0.0, c, d, a, b) if a >= c else (math.inf, c, d, a, b)


def _line_sum(p: float, q: float, j0: int, j1: int) -> float:
    """Sum of p + q j over j0 <= j < j1."""
    return (j1 - j0) * p + q * (j1 * (j1 - 1) - j0 * (j0 - 1)) / 2.0


def run_seconds(a: float, b: float, c: float, o: float, k: int, d: float = 0.0) -> float:
    """Time of k passes whose j-th takes max(a + b j, c + d j) + o (memory and compute grow with context)."""
    if d == 0.0:  # compute does not grow (no attention term): the common case, in its own short form
        if a >= c:
            return k * (a + o) + b * k * (k - 1) / 2.0
        q = (c - a) / b if b > 0.0 else math.inf
        if q > 1e15 or k <= q:
            return k * (c + o)
        js = math.ceil(q)
        if k <= js:
            return k * (c + o)
        return js * (c + o) + (k - js) * (a + o) + b * (k * (k - 1) - js * (js - 1)) / 2.0
    s, p1, q1, p2, q2 = _phases(a, b, c, d)
    if k <= s:
        return _line_sum(p1, q1, 0, k) + k * o
    si = int(s)
    return _line_sum(p1, q1, 0, si) + _line_sum(p2, q2, si, k) + k * o


def fit_passes(p: float, q: float, j0: int, rest: float) -> int:
    """About how many passes p + q j + (o folded into p) from j0 on end within `rest` seconds."""
    lin, quad = p + q * j0, q / 2.0
    if quad <= 0.0 or (lin > 0 and quad * rest < 1e-12 * lin * lin):
        return int(rest / lin) if lin > 0 else 1 << 40
    b = lin - quad  # quad n^2 + (lin - quad) n - rest = 0
    return int((-b + math.sqrt(b * b + 4.0 * quad * rest)) / (2.0 * quad))


def passes_within(a: float, b: float, c: float, o: float, dur: float, d: float = 0.0) -> int:
    """The number of whole passes of such a run that end by time dur after its start (the inverse of run_seconds)."""
    return _within(a, b, c, o, dur, d)[0]


def boundary_at(a: float, b: float, c: float, o: float, start: float, t: float, d: float = 0.0) -> tuple[int, float]:
    """(j, time): the first pass boundary at or after t of such a run started at `start`, and when it comes."""
    k, took, after = _within(a, b, c, o, t - start, d)
    at = start + took
    return (k, at) if at >= t else (k + 1, start + after)


def _within(a: float, b: float, c: float, o: float, dur: float, d: float) -> tuple[int, float, float]:
    """(k, run_seconds of k, run_seconds of k + 1): passes_within, with the times of its passes and the next."""
    if dur <= 0.0:
        return 0, 0.0, run_seconds(a, b, c, o, 1, d)
    if d == 0.0 and a >= c and a + o > 0.0:  # memory-bound from the first pass on: one phase
        ao = a + o
        k = fit_passes(ao, b, 0, dur)
        took = k * ao + b * k * (k - 1) / 2.0  # run_seconds' own short form, so the same floats
        while k > 0 and took > dur:
            k -= 1
            took = k * ao + b * k * (k - 1) / 2.0
        after = (k + 1) * ao + b * (k + 1) * k / 2.0
        while after <= dur:
            k, took = k + 1, after
            after = (k + 1) * ao + b * (k + 1) * k / 2.0
        return k, took, after
    s, p1, q1, p2, q2 = _phases(a, b, c, d)
    first = fit_passes(p1 + o, q1, 0, dur)
    if first <= s:
        k = first
    else:
        si = int(s)
        k = si + fit_passes(p2 + o, q2, si, dur - run_seconds(a, b, c, o, si, d))
    took = run_seconds(a, b, c, o, k, d)
    while k > 0 and took > dur:  # float rounding of the closed form
        k -= 1
        took = run_seconds(a, b, c, o, k, d)
    after = run_seconds(a, b, c, o, k + 1, d)
    while after <= dur:
        k, took = k + 1, after
        after = run_seconds(a, b, c, o, k + 1, d)
    return k, took, after
