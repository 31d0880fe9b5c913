"""The window views' counter increases (with resets) and quantiles, by hand and against a known distribution."""

from __future__ import annotations

import bisect
import math
import random
from pathlib import Path

import duckdb
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collectors.files import read_chunks
from collectors.pipeline import IngestOptions, ingest_exposition
from store import Held
from store.views.counters import bucket_quantiles, counter_increments, histogram_quantile, histogram_quantiles
from store.views.window import Window
from tests.oracles import raw_increase, raw_quantile

BOUNDS = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0]
T1 = 1_790_000_000_000


@pytest.mark.parametrize("q, expected", [
    (0.5, 0.2 + 0.3 * 20 / 60),  # rank 50 lies in (0.2, 0.5], 20 of its 60 observations in
    (0.1, 0.1),                  # rank 10 is the top of the first bucket, which starts at 0
    (0.05, 0.05),
    (0.95, 0.5),                 # rank 95 falls in +Inf: the largest finite bound
])
def test_bucket_quantile_by_hand(q: float, expected: float) -> None:
    assert histogram_quantile([0.1, 0.2, 0.5, math.inf], [10.0, 30.0, 90.0, 100.0], q) == pytest.approx(expected)


def test_bucket_quantile_without_data_and_with_counts_that_go_down() -> None:
    assert histogram_quantile([], [], 0.5) is None
    assert histogram_quantile([1.0, math.inf], [0.0, 0.0], 0.5) is None
    # a count below an earlier one is repaired upwards, as Prometheus does
    assert histogram_quantile([1.0, 2.0, math.inf], [10.0, 5.0, 10.0], 0.5) == pytest.approx(0.5)


def exposition(counts: list[int], total: int, total_sum: float, ts: int, model: str = "m") -> str:
    lines = [f'vllm:time_to_first_token_seconds_bucket{{le="{b}",model_name="{model}"}} {c} {ts}'
             for b, c in zip(BOUNDS, counts, strict=True)]
    lines.append(f'vllm:time_to_first_token_seconds_bucket{{le="+Inf",model_name="{model}"}} {total} {ts}')
    lines.append(f'vllm:time_to_first_token_seconds_sum{{model_name="{model}"}} {total_sum} {ts}')
    lines.append(f'vllm:time_to_first_token_seconds_count{{model_name="{model}"}} {total} {ts}')
    return "\n".join(lines) + "\n"


def cumulative(observations: list[float]) -> list[int]:
    ordered = sorted(observations)
    return [bisect.bisect_right(ordered, b) for b in BOUNDS]


def ingest_text(con: duckdb.DuckDBPyConnection, tmp_path: Path, text: str) -> None:
    path = tmp_path / "ttft.prom"
    path.write_text(text)
    report = ingest_exposition(Held(con), read_chunks(path), kind="file", source=str(path),
                               options=IngestOptions(pool="p", node="vllm-1"), clock=lambda: T1 / 1000 + 3600)
    assert report.counts.rejected == 0


def width_at(x: float) -> float:
    i = bisect.bisect_left(BOUNDS, x)
    return BOUNDS[i] - (BOUNDS[i - 1] if i else 0.0)


def test_quantiles_of_an_exponential_distribution(con: duckdb.DuckDBPyConnection, tmp_path: Path) -> None:
    rate = 2.0  # exponential: quantile q is -ln(1 - q) / rate
    rng = random.Random(11)
    before = [rng.expovariate(rate / 20) for _ in range(5_000)]  # before the window, and 20 times slower
    inside = [rng.expovariate(rate) for _ in range(40_000)]      # observed inside it
    after_restart = [rng.expovariate(rate) for _ in range(20_000)]  # the exporter restarted: counts from zero
    both = before + inside
    text = (exposition(cumulative(before), len(before), sum(before), T1 - 60_000)
            + exposition(cumulative(both), len(both), sum(both), T1)
            + exposition(cumulative(after_restart), len(after_restart), sum(after_restart), T1 + 60_000)
            + exposition([0] * len(BOUNDS), 0, 0, T1, model="other"))
    ingest_text(con, tmp_path, text)
    window = Window(T1, T1 + 120_000, ("p",))  # whole minutes: read from the 1-minute rollup
    for q in (0.5, 0.95, 0.99):
        got = histogram_quantiles(con, window, "serving.time_to_first_token", q)
        true = -math.log(1 - q) / rate
        estimate = got["value"].item()
        assert abs(estimate - true) <= width_at(true), (q, estimate, true)
        assert estimate == pytest.approx(raw_quantile(con, "serving.time_to_first_token", T1, T1 + 120_000, q))
    first_minute = histogram_quantiles(con, Window(T1, T1 + 60_000, ("p",)), "serving.time_to_first_token", 0.5)
    assert first_minute["value"].item() == pytest.approx(-math.log(0.5) / rate, abs=width_at(0.3466))
    assert histogram_quantiles(con, Window(T1, T1 + 60_000, ("nope",)), "serving.time_to_first_token", 0.5).is_empty()


def test_increase_treats_a_drop_as_a_restart(con: duckdb.DuckDBPyConnection, tmp_path: Path) -> None:
    m0 = T1 - T1 % 60_000  # a whole minute
    values = [(m0, 10), (m0 + 15_000, 15), (m0 + 30_000, 3), (m0 + 45_000, 8), (m0 + 75_000, 20)]
    ingest_text(con, tmp_path, "".join(f'vllm:prompt_tokens_total{{model_name="m"}} {v} {t}\n' for t, v in values))
    window = Window(m0 + 60_000, m0 + 120_000, ("p",))
    got = counter_increments(con, window, "serving.tokens.prompt")
    assert got["inc"].to_list() == [12.0]  # the minute before ends at 8: 8 -> 20
    assert raw_increase(con, "serving.tokens.prompt", m0 + 60_000, m0 + 120_000)["increase"].to_list() == [12.0]
    whole = counter_increments(con, Window(m0, m0 + 120_000, ("p",)), "serving.tokens.prompt", step_ms=60_000)
    # first minute: first seen, counts from zero to its last value 8 (the rise 10->15 before the reset is the one
    # thing a rollup cannot see); second minute: 8 -> 20
    assert whole.select("t", "inc").rows() == [(m0, 8.0), (m0 + 60_000, 12.0)]
    # from raw samples: first seen at 10 (counted from zero), 10 -> 15, the restart at 3, 3 -> 8
    assert raw_increase(con, "serving.tokens.prompt", m0, m0 + 60_000)["increase"].to_list() == [10 + 5 + 3 + 5]


@settings(max_examples=200, deadline=None)
@given(groups=st.lists(st.lists(st.integers(0, 50), min_size=1, max_size=6), min_size=1, max_size=5),
       q=st.sampled_from([0.0, 0.01, 0.5, 0.9, 0.99, 1.0]), inf=st.booleans())
def test_the_frame_of_quantiles_equals_the_quantile_of_each_group(groups: list[list[int]], q: float,
                                                                   inf: bool) -> None:
    rows = []
    for g, counts in enumerate(groups):  # counts may fall (a reset between buckets) and may all be zero
        bounds = BOUNDS[:len(counts)]
        if inf:
            bounds = [*bounds[:-1], math.inf]
        rows += [{"pool": "p", "t": g, "bound": b, "inc": float(c)} for b, c in zip(bounds, counts, strict=True)]
    got = bucket_quantiles(pl.DataFrame(rows).sample(fraction=1.0, shuffle=True, seed=1), q).sort("t")
    for (t, value), counts in zip(got.select("t", "value").rows(), groups, strict=True):
        bounds = BOUNDS[:len(counts)] if not inf else [*BOUNDS[:len(counts) - 1], math.inf]
        assert value == histogram_quantile(bounds, [float(c) for c in counts], q), (t, counts)
