"""The evidence a fit compares with: how a stored trace's groups of requests are labelled for the operator."""

from __future__ import annotations

import datetime as dt
import re

import numpy as np
import polars as pl

from replay import Candidate
from replay.calibrate.evidence import STRETCH, STRETCHES, WARMUP, Trace
from replay.fleet import pools_by_id
from tests.replay_fleets import fleet, pool

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
