"""One replica driven event by event (replay/replica/): admission, chunked prefill, a newcomer joining at the next
pass boundary (or the one after, under asynchronous scheduling), preemption when decoding outgrows the KV cache,
SGLang's schedule, a failure and its repair.

Every pass here takes 10 ms whatever its batch: weights read at 1e-12 s a byte, no KV bytes, no compute and no
engine time, so the times below are counts of passes, written out by hand.
"""

from __future__ import annotations

import math

import pytest

from replay.book import DECODE, DONE, PREFILL, WAITING, Book
from replay.replica import INF, Replica
from replay.step import StepModel

PASS = 0.01


def replica(*, budget: int = 64, max_concurrency: int = 8, kv_capacity: int = 10_000, n: int = 8,
            prefill_first: bool = False, ahead: bool = False) -> Replica:
    step = StepModel(pp=1, s_per_byte=1e-12, s_per_token=0.0, kv_bytes=0.0, weight_bytes=PASS * 1e12, pick=1.0,
                     overhead_s=0.0)
    return Replica(0, 0, 0, step, max_concurrency=max_concurrency, budget=budget, kv_capacity=kv_capacity,
                   rate=3.6, book=Book(n, [0] * n), loads=[0], queues=[0], prefill_first=prefill_first,
                   ahead=ahead)


def send(rep: Replica, i: int, t: float, prompt: int, out: int) -> None:
    rep.book.load(i, prompt, prompt, out, out)
    rep.arrive(i, t)


def run_until_idle(rep: Replica, until: float = INF) -> list[float]:
    """Handle the replica's run ends until it idles (or until `until`); returns the boundaries it passed."""
    seen = []
    while rep.next_at < INF and rep.next_at <= until:
        seen.append(rep.next_at)
        rep.boundary(rep.next_at)
    return seen


def test_a_prompt_longer_than_the_budget_is_chunked_and_its_first_token_ends_the_last_chunk() -> None:
    rep = replica(budget=64)
    send(rep, 0, 0.0, prompt=100, out=5)  # chunks of 64 and 36, then four decode passes
    assert rep.book.phase[0] == PREFILL and rep.chunks == [(0, 64)]
    run_until_idle(rep)
    assert rep.book.first[0] == pytest.approx(2 * PASS)
    assert rep.book.done[0] == pytest.approx(6 * PASS) and rep.book.phase[0] == DONE
    assert rep.busy == pytest.approx(6 * PASS) and rep.spans == pytest.approx([0.0, 6 * PASS])
    # busy cost (3.6 a busy second here) is shared by the tokens each pass computed: all six passes are its own
    assert rep.book.cost[0] == pytest.approx(6 * PASS * 3.6)
    assert rep.kv_held == rep.kv_read == rep.running == 0


def test_a_newcomer_joins_at_the_next_pass_boundary() -> None:
    rep = replica()
    send(rep, 0, 0.0, prompt=10, out=20)
    assert rep.run_passes == 1  # its prompt's pass; its decode run is planned at that boundary
    run_until_idle(rep, until=PASS)
    assert rep.run_passes == 19  # one run of 19 identical decode passes, in closed form
    send(rep, 1, 2.5 * PASS, prompt=10, out=3)  # mid-pass: the run is cut at 30 ms, where it joins
    assert rep.next_at == pytest.approx(3 * PASS)
    run_until_idle(rep)
    assert rep.book.first[1] == pytest.approx(4 * PASS)  # its prompt shares the 30-40 ms pass with the decoder
    assert rep.book.done[1] == pytest.approx(6 * PASS)
    assert rep.book.done[0] == pytest.approx(20 * PASS)  # the decoder never paused: 1 + 19 passes


@pytest.mark.parametrize(("arrives", "joins"), [(2.5, 4), (3.0, 4), (3.0001, 5)])
def test_under_asynchronous_scheduling_a_newcomer_joins_the_pass_after_next(arrives: float, joins: int) -> None:
    # the pass after the one running was composed as it began: a request arriving during pass k (or as it begins)
    # joins k + 2; without it, the boundary at or after the arrival
    for ahead in (False, True):
        rep = replica(ahead=ahead)
        send(rep, 0, 0.0, prompt=10, out=20)
        run_until_idle(rep, until=PASS)
        send(rep, 1, arrives * PASS, prompt=10, out=3)
        at = joins if ahead else math.ceil(arrives)
        assert rep.next_at == pytest.approx(at * PASS)
        run_until_idle(rep)
        assert rep.book.first[1] == pytest.approx((at + 1) * PASS)
        assert rep.book.done[1] == pytest.approx((at + 3) * PASS)
        assert rep.book.done[0] == pytest.approx(20 * PASS)


def test_under_asynchronous_scheduling_an_arrival_in_a_runs_last_pass_waits_one_more() -> None:
    # request 1 comes during the prompt's pass (0-10 ms), a run of one pass that is not cut: without asynchronous
    # scheduling it joins at 10 ms; with it, the 10-20 ms pass was composed at 0 ms, so it joins at 20 ms
    for ahead, first in ((False, 2), (True, 3)):
        rep = replica(ahead=ahead)
        send(rep, 0, 0.0, prompt=10, out=20)
        send(rep, 1, 0.5 * PASS, prompt=10, out=2)
        run_until_idle(rep)
        assert rep.book.first[1] == pytest.approx(first * PASS)
        assert rep.book.done[1] == pytest.approx((first + 1) * PASS)
        assert rep.book.wait[1] == pytest.approx((first - 1.5) * PASS)
        assert rep.book.done[0] == pytest.approx(20 * PASS)


def test_under_asynchronous_scheduling_an_idle_replica_starts_at_once() -> None:
    # nothing running: no pass is composed beside another, so requests arriving together share the first pass,
    # and one arriving when the last sequence finishes starts at that boundary
    rep = replica(ahead=True)
    send(rep, 0, 0.0, prompt=10, out=3)
    send(rep, 1, 0.0, prompt=10, out=3)
    run_until_idle(rep, until=2.5 * PASS)
    send(rep, 2, 2.5 * PASS, prompt=10, out=2)  # during the last pass: the replica is idle at 30 ms
    run_until_idle(rep)
    assert rep.book.first[:3] == pytest.approx([PASS, PASS, 4 * PASS])
    assert rep.book.done[:3] == pytest.approx([3 * PASS, 3 * PASS, 5 * PASS])


def test_admission_waits_for_kv_room_and_the_head_of_the_queue_blocks_the_rest() -> None:
    rep = replica(budget=1000, kv_capacity=200)
    send(rep, 0, 0.0, prompt=100, out=3)
    send(rep, 1, 0.0, prompt=120, out=3)  # 100 + 120 and a token of room would pass 200
    send(rep, 2, 0.0, prompt=10, out=3)   # would fit, but waits behind request 1
    assert rep.book.phase[:3] == [PREFILL, WAITING, WAITING] and rep.queues == [2]
    run_until_idle(rep)
    assert rep.book.done[0] == pytest.approx(3 * PASS)
    assert rep.book.first[1] == rep.book.first[2] == pytest.approx(4 * PASS)  # admitted together once 0 is done
    assert rep.book.wait[1] == pytest.approx(3 * PASS) and rep.queues == [0]


def test_decoding_past_the_kv_cache_preempts_the_last_admitted_and_recomputes_it() -> None:
    rep = replica(budget=1000, kv_capacity=210)
    send(rep, 0, 0.0, prompt=100, out=40)
    send(rep, 1, 0.0, prompt=100, out=40)  # both fit at 100 + 100 + 2 <= 210, then grow a token a pass each
    run_until_idle(rep)
    assert rep.book.preempted[:2] == [0, 1]  # the later one gave way and was prefilled again from its prompt
    assert rep.book.done[0] < rep.book.done[1]
    assert rep.kv_held == rep.kv_read == 0


def test_prefill_first_runs_a_waiting_prompt_alone_and_the_decoder_waits() -> None:
    rep = replica(prefill_first=True)
    send(rep, 0, 0.0, prompt=10, out=10)
    run_until_idle(rep, until=PASS)
    send(rep, 1, 1.5 * PASS, prompt=10, out=2)  # joins at 20 ms with a pass of its prompt alone
    run_until_idle(rep)
    assert rep.book.first[1] == pytest.approx(3 * PASS)
    assert rep.book.done[0] == pytest.approx(11 * PASS)  # one pass later than without the newcomer


def test_a_failure_loses_what_runs_and_what_waits_and_the_repair_starts_on_the_queue() -> None:
    rep = replica(max_concurrency=1)
    send(rep, 0, 0.0, prompt=10, out=50)
    send(rep, 1, 0.0, prompt=10, out=5)
    lost, tokens = rep.fail(3.5 * PASS)
    # its prompt, its first token and the two passes that decoded before the one it died in: computed, then lost
    assert lost == [0, 1] and tokens == 10 + 1 + 2
    assert rep.down and rep.next_at == INF and rep.busy == pytest.approx(3.5 * PASS)
    send(rep, 1, 4 * PASS, prompt=10, out=5)  # a retry while it is down waits for the repair
    assert rep.next_at == INF and rep.book.phase[1] == WAITING
    rep.repair(10 * PASS)
    run_until_idle(rep)
    assert rep.book.first[1] == pytest.approx(11 * PASS) and rep.book.done[1] == pytest.approx(15 * PASS)


def test_what_a_router_reads_knows_only_the_predicted_lengths() -> None:
    rep = replica(max_concurrency=1)
    rep.book.load(0, 10, 10, 1000, 5)  # it will run 1000 passes; routers are told 5
    rep.arrive(0, 0.0)
    run_until_idle(rep, until=PASS)
    rep.book.load(1, 10, 10, 3, 3)
    assert rep.wait_estimate(PASS) == pytest.approx(4 * PASS)  # its one slot frees when 0 is predicted done
    rep.arrive(1, PASS)
    # the decoder is predicted done after its 4 more predicted passes; then the newcomer's 3 tokens drain
    assert rep.wait_estimate(PASS) == pytest.approx(4 * PASS + 3 * PASS)
    ttft, e2e = rep.predict(1, PASS)
    assert ttft == pytest.approx(7 * PASS + PASS) and e2e == pytest.approx(ttft + 2 * PASS)
    assert math.isnan(rep.book.first[1]) and rep.book.phase[0] == DECODE


def test_what_a_router_reads_counts_the_pass_composed_ahead() -> None:
    # a slot free and nothing queued: the newcomer waits half the running pass, and under asynchronous scheduling
    # the pass after it, then its prompt's pass
    ttft = {}
    for ahead in (False, True):
        rep = replica(ahead=ahead)
        send(rep, 0, 0.0, prompt=10, out=20)
        run_until_idle(rep, until=PASS)
        rep.book.load(1, 10, 10, 3, 3)
        ttft[ahead] = rep.predict(1, 1.2 * PASS)[0]
    assert ttft == pytest.approx({False: 1.5 * PASS, True: 2.5 * PASS})


def test_kv_peak_and_occupancy_are_counted_pass_by_pass() -> None:
    rep = replica(budget=1000, kv_capacity=200)
    send(rep, 0, 0.0, prompt=100, out=3)
    send(rep, 1, 0.0, prompt=120, out=3)
    send(rep, 2, 0.0, prompt=10, out=3)
    run_until_idle(rep)
    # request 0 alone: its prompt's 100 tokens reserved for the prefill pass (50.0 %), then 101 and 102 held over
    # its two decode passes (a mean of 101.5: 50.7 %); then 1 and 2 together: 130 for their prefill (65.0 %), and
    # 132 and 134 over their two decode passes (a mean of 133: 66.5 %), ending at 136, the peak; bins are tenths
    # of a percent
    assert rep.kv_peak == 136
    assert {b: round(s, 6) for b, s in enumerate(rep.kv_hist) if s} == {500: PASS, 507: 2 * PASS, 650: PASS,
                                                                       665: 2 * PASS}
    assert sum(rep.kv_hist) == pytest.approx(rep.busy)
