"""Counter increases with resets, and p50/p95/p99 from stored buckets against a known distribution."""

from __future__ import annotations

import bisect
import math
import random
from pathlib import Path

import duckdb
import pytest

from collectors.files import read_chunks
from collectors.pipeline import IngestOptions, ingest_exposition
from store import Held
from store.errors import StoreError
from store.quantiles import bucket_quantile, histogram_quantiles, increase

BOUNDS = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0]
T1 = 1_790_000_000_000


@pytest.mark.parametrize("q, expected", [
    (0.5, 0.2 + 0.3 * 20 / 60),  # rank 50 lies in (0.2, 0.5], 20 of its 60 observations in
    (0.1, 0.1),                  # rank 10 is the top of the first bucket, which starts at 0
    (0.05, 0.05),
    (0.95, 0.5),                 # rank 95 falls in +Inf: the largest finite bound
])
def test_bucket_quantile_by_hand(q: float, expected: float) -> None:
    buckets = [(0.5, 90.0), (0.1, 10.0), (math.inf, 100.0), (0.2, 30.0)]
    assert bucket_quantile(q, buckets) == pytest.approx(expected)


def test_bucket_quantile_without_data() -> None:
    assert bucket_quantile(0.5, []) is None
    assert bucket_quantile(0.5, [(1.0, 3.0)]) is None           # no +Inf bucket
    assert bucket_quantile(0.5, [(1.0, 0.0), (math.inf, 0.0)]) is None


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
    text = (exposition(cumulative(before), len(before), sum(before), T1)
            + exposition(cumulative(both), len(both), sum(both), T1 + 60_000)
            + exposition(cumulative(after_restart), len(after_restart), sum(after_restart), T1 + 120_000)
            + exposition([0] * len(BOUNDS), 0, 0, T1, model="other"))
    ingest_text(con, tmp_path, text)
    got = histogram_quantiles(con, "serving.time_to_first_token", T1, T1 + 120_000, pool="p")
    for q, estimate in got.items():
        true = -math.log(1 - q) / rate
        assert estimate is not None and abs(estimate - true) <= width_at(true), (q, estimate, true)
    only_window = histogram_quantiles(con, "serving.time_to_first_token", T1, T1 + 60_000, pool="p",
                                      match={"model": "m"}, quantiles=(0.5,))
    assert only_window[0.5] == pytest.approx(-math.log(0.5) / rate, abs=width_at(0.3466))
    assert histogram_quantiles(con, "serving.time_to_first_token", T1, T1 + 60_000, pool="nope") == {
        0.5: None, 0.95: None, 0.99: None}


def test_increase_treats_a_drop_as_a_restart(con: duckdb.DuckDBPyConnection, tmp_path: Path) -> None:
    values = [(T1, 10), (T1 + 15_000, 15), (T1 + 30_000, 3), (T1 + 45_000, 8)]
    ingest_text(con, tmp_path, "".join(f'vllm:prompt_tokens_total{{model_name="m"}} {v} {t}\n' for t, v in values))
    got = increase(con, "serving.tokens.prompt", T1, T1 + 45_000, pool="p")
    assert got.select("node", "increase").rows() == [("vllm-1", 5 + 3 + 5)]  # 10->15, restart at 3, 3->8
    first_seen = increase(con, "serving.tokens.prompt", T1 - 1, T1 + 15_000)
    assert first_seen["increase"].to_list() == [15.0]  # a series first seen in the window counts from zero
    with pytest.raises(StoreError, match="empty window"):
        increase(con, "serving.tokens.prompt", T1, T1)
