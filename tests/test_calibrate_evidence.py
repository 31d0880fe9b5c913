"""The evidence a fit compares with: how a stored trace's groups of requests are labelled for the operator, and
the note on benchmark rows that do not say which figure of their requests they give."""

from __future__ import annotations

import dataclasses
import datetime as dt
import re

import numpy as np
import polars as pl

from replay import Candidate, parse_bench_table
from replay.calibrate.evidence import STRETCH, STRETCHES, WARMUP, Bench, Trace
from replay.calibrate.notes import STATISTIC_GAP, statistic_note
from replay.fleet import pools_by_id
from tests.replay_fleets import flat_model, fleet, pool

START = dt.datetime(2026, 12, 7, tzinfo=dt.UTC)


def stored(n: int, first_ms: int) -> pl.DataFrame:
    """n requests two seconds apart from first_ms, observed on pool p."""
    return pl.DataFrame({"arrival_ms": first_ms + 2000 * np.arange(n), "in_tokens": 200 + np.arange(n) % 700,
                         "out_tokens": 50, "obs_pool": "p", "obs_ttft_s": 0.1, "obs_e2e_s": 1.0})


def test_groups_by_arrival_are_labelled_with_the_stored_clock_times() -> None:
    # a long trace is sampled as stretches pulled together in time; the labels still say when the requests came
    n = 2 * STRETCHES * (STRETCH + WARMUP)
    first = int(START.timestamp() * 1000)
    spec = pools_by_id(fleet(pool("p")), Candidate(name="t"))["p"]
    labels = [x for x in Trace(spec, stored(n, first)).labels["TPOT"] if x.startswith("arrivals")]
    assert labels
    pattern = re.compile(r"arrivals (\S+ \S+) to (\S+) UTC \((\d+) requests\)")
    spans = []
    for label in labels:
        m = pattern.fullmatch(label)
        assert m, label
        begin = dt.datetime.strptime(m[1], "%Y-%m-%d %H:%M:%S").replace(tzinfo=dt.UTC)
        end = dt.datetime.strptime(f"{m[1][:10]} {m[2]}", "%Y-%m-%d %H:%M:%S").replace(tzinfo=dt.UTC)
        assert begin <= end and int(m[3]) >= 20
        spans.append((begin, end))
    # the first scored request comes after its stretch's 100 warm-ups (200 s); the last is the trace's last
    assert min(b for b, _ in spans) == START + dt.timedelta(seconds=2 * WARMUP)
    assert max(e for _, e in spans) == START + dt.timedelta(seconds=2 * (n - 1))
    # a trace whose times are its own offsets from 0 keeps seconds
    plain = [x for x in Trace(spec, stored(300, 0)).labels["TPOT"] if x.startswith("arrivals")]
    assert plain[0] == "arrivals at 0-38 s (20 requests)"


def test_rows_that_do_not_say_their_statistic_get_a_note_where_it_matters() -> None:
    # 32 clients starting at once with lengths drawn up to 0.8 of 2048 / 64: the first wave's prompts queue behind
    # each other's chunks, which the mean TTFT holds and the median does not
    reg = fleet(pool("p", concurrency=64, mfu=0.4, eff=0.6), models=(flat_model(params_b=8.0),))
    spec = dataclasses.replace(pools_by_id(reg, Candidate(name="t"))["p"], chunk_overhead_us=1500.0)
    head = "pool,isl,osl,concurrency,ttft_ms,tpot_ms,arrivals,range_ratio,range_style,num_prompts,statistic\n"
    row = "p,2048,64,32,100,10,lockstep,0.8,up_to,320,"
    (mean, median), = Bench(parse_bench_table(head + row + "\n")).means_and_medians(spec, [0])
    assert mean / median > STATISTIC_GAP
    (note,) = statistic_note(spec, Bench(parse_bench_table(head + row + "\n" + row + "mean\n")))
    assert note.startswith("1 of 2 benchmark rows of p do not say which figure of their requests they give")
    assert f"mean TTFT is up to {mean / median:.1f}x the median (ISL 2048, OSL 64 at concurrency 32: " \
           f"{mean:.0f} ms against {median:.0f} ms)" in note
    assert statistic_note(spec, Bench(parse_bench_table(head + row + "median\n"))) == []  # said
    # spread-out clients at fixed lengths: every request alike, mean and median one figure, nothing to say
    assert statistic_note(spec, Bench(parse_bench_table(head + "p,2048,64,32,100,10,,,,,\n"))) == []


def test_the_note_reads_the_points_the_fit_ran_on_that_pool() -> None:
    # the fit's record runs every row on its coefficients; the note on the same pool reads those runs again
    reg = fleet(pool("p", concurrency=64, mfu=0.4, eff=0.6), models=(flat_model(params_b=8.0),))
    spec = pools_by_id(reg, Candidate(name="t"))["p"]
    head = "pool,isl,osl,concurrency,ttft_ms,tpot_ms,arrivals,range_ratio,range_style,num_prompts,statistic\n"
    bench = Bench(parse_bench_table(head + "p,2048,64,16,100,10,lockstep,0.8,up_to,160,mean\n"
                                           "p,2048,64,32,100,10,lockstep,0.8,up_to,320,\n"))
    ttft, _ = bench.model(spec)
    points = bench.points(spec)
    assert bench.points(spec) is points  # not rerun
    assert ttft[0] * 1000 == points[0].ttft_ms_mean and ttft[1] * 1000 == points[1].ttft_ms_p50
    assert bench.means_and_medians(spec, [1]) == [(points[1].ttft_ms_mean, points[1].ttft_ms_p50)]
    other = dataclasses.replace(spec, mfu=0.2)
    assert bench.points(other) is not points and bench.points(other)[1].ttft_ms_p50 > points[1].ttft_ms_p50
