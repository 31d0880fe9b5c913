"""A closed-loop serving benchmark of one replica, as `vllm bench serve --max-concurrency N --num-prompts M` measures.

N clients share `requests` requests: at most N are outstanding, and a client sends its next request the moment its
previous one completes, until all were sent. Each request asks for isl prompt tokens and osl output tokens, or, with
a random range ratio R, lengths drawn uniformly by one seeded numpy Generator (all prompt lengths, then all output
lengths, as the clients draw them; no tokenizer, so no special tokens are subtracted). The two clients read R
differently (`range_style`): `around` is `vllm bench serve`'s random dataset, the integers in [floor(isl (1 - R)),
ceil(isl (1 + R))] and [max(1, floor(osl (1 - R))), ceil(osl (1 + R))], 0 <= R < 1; `up_to` is SGLang's
bench_serving (and vLLM's benchmark_serving.py before `vllm bench`), the integers in [max(1, floor(isl R)), isl] and
likewise below osl, 0 <= R <= 1, where R = 1 is fixed lengths and SGLang's default R = 0 draws from 1 up to the
length. Every request is measured unless warm-ups are asked for. Reported per concurrency, over the measured
requests: TTFT, TPOT ((e2e - TTFT) / (output tokens - 1), for requests of more than one output token) and e2e
latency as mean, median and p99 (numpy's linear percentiles, as vLLM's), and output tokens/s and requests/s over the
run (first measured send to last completion). It runs the same replica model as a replay, so a pool's model can be
checked against a published benchmark table before a replay is trusted.

How the closed loop reaches steady state. On a measured server the clients' requests end up spread over time:
per-request jitter keeps them from finishing together, so each one arrives to find the others at different
points of their service. A deterministic loop whose clients all start at 0 stays in lockstep instead (every
wave finishes in one pass and the replacements are prefilled as one batch, so TTFT climbs in steps of whole
batched prefills). So client j sends its first request at j/N of one request's expected service time at that
concurrency (`service_seconds`: the step model's passes of one cycle with the clients spread evenly), which puts
each client at its own point of the cycle from the first wave on; a first request sent during a pass waits for
its end, as on a server. At concurrency 1 this is the plain back-to-back loop. Warm-ups are the first requests
of the same loop, sent by the same clients and not measured, so that measurement can start past the first wave;
vLLM runs its warm-ups as a separate phase and lets it drain, which in a model without caches would change
nothing. Like vLLM's warm-ups they repeat the first request's lengths.

A request sent on a completion waits for a pass as well. The engine schedules its next pass the moment one ends
(vLLM's engine core and SGLang's scheduler loop without a pause), while the completion still has to reach its
client, and the client's next request the engine: through the API server, the network and its tokenizer. So a
request sent at a completion's instant reaches the engine an instant after the next pass began and waits for it
to end, unless the replica is idle: its TTFT is that pass and its own, and grows with concurrency as the pass of
the other clients' decode tokens does. With the pool's `async_scheduling` the pass after that one was composed
as it began, so the request waits for two.

`arrivals="lockstep"` runs the loop the other way, as a benchmark client measures when every client starts at
once and the lengths are fixed (SGLang's and vLLM's clients with an unbounded request rate): the clients stay
in waves, each wave's prompts are prefilled together and TTFT is that of a batched prefill. A benchmark table
measured so says it in its `arrivals` column, and calibration replays its rows the same way. With lengths drawn
at random the same start is what such a client measures: the clients begin together and drift apart as their
lengths differ, which neither extreme is; a table says so with its `range_ratio` and `range_style` columns.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from replay.book import Book
from replay.costmodel import step_model
from replay.exceptions import ReplayError
from replay.fleet import PoolSpec
from replay.replica.estimates import Replica
from replay.replica.state import INF

ARRIVALS = ("staggered", "lockstep")  # a benchmark table row without arrivals is staggered
RANGE_STYLES = ("around", "up_to")    # how a client reads its random range ratio (above)
# which statistic over a run's requests a benchmark table's TTFT and TPOT are (vLLM and SGLang print all three),
# and how a row that gives it is described
STATISTIC_NAMES = {"median": "medians", "mean": "means", "p99": "99th percentiles"}
STATISTICS = tuple(STATISTIC_NAMES)


@dataclass(frozen=True)
class BenchPoint:
    """What a closed-loop run at one concurrency measured (times in ms), over its measured requests."""

    concurrency: int
    ttft_ms_p50: float
    ttft_ms_p99: float
    tpot_ms_p50: float | None
    tpot_ms_p99: float | None
    output_tok_s: float
    req_s: float
    ttft_ms_mean: float = 0.0
    tpot_ms_mean: float | None = None
    e2el_ms_mean: float = 0.0
    e2el_ms_p50: float = 0.0
    e2el_ms_p99: float = 0.0
    requests: int = 0              # measured requests
    duration_s: float = 0.0        # first measured send to last completion
    peak_concurrency: int = 0      # the most measured requests outstanding at one moment

    def latency_ms(self, statistic: str) -> tuple[float, float | None]:
        """(TTFT, TPOT) as the `statistic` of STATISTICS over the measured requests."""
        if statistic == "mean":
            return self.ttft_ms_mean, self.tpot_ms_mean
        if statistic == "median":
            return self.ttft_ms_p50, self.tpot_ms_p50
        if statistic == "p99":
            return self.ttft_ms_p99, self.tpot_ms_p99
        raise ReplayError(f"unknown statistic {statistic!r}; known: {', '.join(STATISTICS)}")


def schedule_text(pool: PoolSpec) -> str:
    """How the pool's engine schedules, for a header: 'decode first', 'prefill first, passes composed ahead'."""
    first = pool.schedule.replace("_", " ")
    return f"{first}, passes composed ahead" if pool.async_scheduling else first


def length_bounds(length: int, range_ratio: float, *, low: int = 0, style: str = "around") -> tuple[int, int]:
    """The integers a random-dataset length is drawn from: [floor(length (1 - R)), ceil(length (1 + R))] around
    it, or [max(1, floor(length R)), length] up to it."""
    if style == "up_to":
        return min(length, max(1, low, math.floor(length * range_ratio))), length
    return max(low, math.floor(length * (1 - range_ratio))), max(low, math.ceil(length * (1 + range_ratio)))


def random_lengths(isl: int, osl: int, requests: int, *, range_ratio: float = 0.0, seed: int = 0,
                   style: str = "around") -> tuple[np.ndarray, np.ndarray]:
    """Prompt and output lengths of `requests` requests, as the client of `style` draws them (fixed when R is 0
    around the lengths, or 1 up to them)."""
    check_range(range_ratio, style)
    rng = np.random.default_rng(seed)
    in_low, in_high = length_bounds(isl, range_ratio, style=style)
    out_low, out_high = length_bounds(osl, range_ratio, low=1, style=style)
    ins = rng.integers(in_low, in_high + 1, size=requests)
    outs = rng.integers(out_low, out_high + 1, size=requests)
    return ins.astype(np.int64), outs.astype(np.int64)


def mean_lengths(isl: int, osl: int, range_ratio: float, style: str) -> tuple[int, int]:
    """The prompt and output lengths a client of `style` draws on average: the lengths themselves around them,
    the middle of the range up to them."""
    if style != "up_to":
        return isl, osl
    return (round(sum(length_bounds(isl, range_ratio, style=style)) / 2),
            round(sum(length_bounds(osl, range_ratio, low=1, style=style)) / 2))


def service_seconds(pool: PoolSpec, concurrency: int, isl: int, osl: int) -> float:
    """One request's expected service time (admission to completion) in a closed loop of `concurrency` clients
    spread evenly over the cycle.

    A request takes S passes (its prompt chunks, then osl - 1 decode passes) and each running client sends one
    request per cycle, so a cycle is S passes holding every running client's prompt: spread evenly over
    min(S, running x chunks) of them, the rest decode only, every pass reading the KV of the running sequences
    at half their output. At most the pool's max_concurrency run; the other clients wait in its queue.
    """
    step = step_model(pool)
    running = min(concurrency, max(1, pool.max_concurrency))
    chunk = max(1, pool.max_num_batched_tokens - (running - 1))
    prompt_passes = max(1, math.ceil(isl / chunk))
    passes = prompt_passes + osl - 1
    with_prompt = min(passes, running * prompt_passes)
    kv = running * (isl + osl / 2.0)
    decoding = running - running * prompt_passes / with_prompt
    cycle = with_prompt * step.pass_seconds(running, round(running * isl / with_prompt + decoding), kv,
                                            round(decoding))
    return cycle + (passes - with_prompt) * step.pass_seconds(running, running, kv, running)


def range_problem(range_ratio: float, style: str) -> str | None:
    """What a client of `style` expects of its random range ratio, when this one is not it; else None."""
    if style not in RANGE_STYLES:
        return f"a range style {' or '.join(RANGE_STYLES)}, got {style[:40]!r}"
    if style == "up_to" and not 0.0 <= range_ratio <= 1.0:  # also refuses nan
        return f"a random range ratio in [0, 1] up to the lengths, got {range_ratio!r}"
    if style == "around" and not 0.0 <= range_ratio < 1.0:
        return f"a random range ratio in [0, 1), got {range_ratio!r}"
    return None


def fixed_lengths(range_ratio: float, style: str) -> bool:
    """Whether a client of `style` at this ratio sends every request at the lengths asked for."""
    return range_ratio == (1.0 if style == "up_to" else 0.0)


def check_range(range_ratio: float, style: str = "around") -> None:
    """ReplayError unless the ratio is one the style's client takes."""
    if (problem := range_problem(range_ratio, style)) is not None:
        raise ReplayError(f"bench needs {problem}")


def closed_loop(pool: PoolSpec, concurrency: int, isl: int, osl: int, requests: int, *, range_ratio: float = 0.0,
                seed: int = 0, warmups: int = 0, arrivals: str = "staggered",
                range_style: str = "around") -> BenchPoint:
    """Run the benchmark on one replica of the pool: `requests` measured requests after `warmups` unmeasured ones,
    the clients' first requests staggered over a cycle or all at once (`arrivals`)."""
    if arrivals not in ARRIVALS:
        raise ReplayError(f"unknown arrivals {arrivals!r}; known: {', '.join(ARRIVALS)}")
    if concurrency < 1 or isl < 0 or osl < 1 or requests < 1:
        raise ReplayError(f"bench needs concurrency >= 1, isl >= 0, osl >= 1 and requests >= 1; got "
                          f"concurrency {concurrency}, isl {isl}, osl {osl}, requests {requests}")
    check_range(range_ratio, range_style)
    if warmups < 0:
        raise ReplayError(f"bench needs warmups >= 0, got {warmups!r}")
    if seed < 0:
        raise ReplayError(f"bench needs a seed >= 0, got {seed!r}")
    drawn_in, drawn_out = random_lengths(isl, osl, requests, range_ratio=range_ratio, seed=seed,
                                        style=range_style)
    ins = np.concatenate([np.full(warmups, drawn_in[0]), drawn_in]).tolist()
    outs = np.concatenate([np.full(warmups, drawn_out[0]), drawn_out]).tolist()
    big = int(np.argmax(drawn_in + drawn_out))
    if drawn_in[big] + drawn_out[big] > pool.kv_capacity_tokens:
        raise ReplayError(f"pool {pool.id}: a request of {drawn_in[big]} + {drawn_out[big]} tokens does not fit the "
                          f"replica's KV cache of {pool.kv_capacity_tokens} tokens")
    n = warmups + requests
    clients = min(concurrency, n)
    book = Book(n, [0] * n)
    replica = Replica(0, 0, 0, step_model(pool), max_concurrency=pool.max_concurrency,
                      budget=pool.max_num_batched_tokens, kv_capacity=pool.kv_capacity_tokens,
                      rate=pool.replica_cost_per_s, book=book, loads=[0], queues=[0],
                      prefill_first=pool.schedule == "prefill_first", ahead=pool.async_scheduling)
    start = [0.0] * n
    done: list[int] = []
    sent = 0

    def send(t: float) -> None:
        nonlocal sent
        i = sent
        book.load(i, ins[i], ins[i], outs[i], outs[i])  # one replica: nothing to route
        start[i] = t
        replica.arrive(i, t)
        sent += 1

    replica.on_done = lambda i, t: done.append(i)
    spread = service_seconds(pool, clients, *mean_lengths(isl, osl, range_ratio, range_style)) \
        if clients > 1 and arrivals == "staggered" else 0.0
    firsts = [j * spread / clients for j in range(clients)]
    send(0.0)
    waiting = 1  # the next client to send its first request
    while replica.next_at < INF or waiting < clients:
        if waiting < clients and firsts[waiting] <= replica.next_at:
            if sent < n:  # the others' next requests may have taken the last ones
                send(firsts[waiting])
            waiting += 1
            continue
        t = replica.next_at
        replica.boundary(t)
        # each completion frees its client, which sends its next request at once; it reaches the engine an
        # instant after the engine has scheduled its next pass, so it waits for that pass to end (above)
        later = math.nextafter(t, math.inf)
        while done:
            done.pop()
            if sent < n:
                send(later)
    return _measure(concurrency, np.array(start[warmups:]), np.array(book.first[warmups:]),
                    np.array(book.done[warmups:]), np.array(outs[warmups:]))


def _measure(concurrency: int, start: np.ndarray, first: np.ndarray, end: np.ndarray,
             outs: np.ndarray) -> BenchPoint:
    """The vLLM-style statistics of the measured requests (times in s in, ms out)."""
    ttft = (first - start) * 1000
    e2e = (end - start) * 1000
    many = outs > 1
    tpot = (e2e[many] - ttft[many]) / (outs[many] - 1) if many.any() else None
    duration = float(end.max() - start.min())
    events = sorted([(s, 1) for s in start] + [(e, -1) for e in end])  # ends first at the same instant
    peak = int(np.cumsum([d for _, d in events]).max())
    return BenchPoint(concurrency=concurrency, ttft_ms_p50=float(np.percentile(ttft, 50)),
                      ttft_ms_p99=float(np.percentile(ttft, 99)),
                      tpot_ms_p50=None if tpot is None else float(np.percentile(tpot, 50)),
                      tpot_ms_p99=None if tpot is None else float(np.percentile(tpot, 99)),
                      output_tok_s=float(outs.sum()) / duration if duration > 0 else 0.0,
                      req_s=len(outs) / duration if duration > 0 else 0.0,
                      ttft_ms_mean=float(ttft.mean()), tpot_ms_mean=None if tpot is None else float(tpot.mean()),
                      e2el_ms_mean=float(e2e.mean()), e2el_ms_p50=float(np.percentile(e2e, 50)),
                      e2el_ms_p99=float(np.percentile(e2e, 99)), requests=len(outs), duration_s=duration,
                      peak_concurrency=peak)


def concurrency_levels(text: str) -> tuple[int, ...]:
    """Concurrency levels written as '1, 8, 64': whole numbers >= 1, sorted, each once; ValueError saying what
    was expected."""
    try:
        levels = tuple(sorted({int(v) for v in text.replace(" ", "").split(",") if v}))
    except ValueError:
        raise ValueError(f"expected whole numbers separated by commas, got {text!r}") from None
    if not levels or levels[0] < 1:
        raise ValueError(f"expected whole numbers >= 1, got {text!r}")
    return levels


def default_requests(concurrency: int) -> int:
    """Enough requests for a few waves of clients: ten per client, at least 100."""
    return max(100, 10 * concurrency)
