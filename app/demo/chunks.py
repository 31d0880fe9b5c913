"""The demo's requests served on the replay's model a chunk of the window at a time, so its memory stays small.

One replay of a week of a large fleet's requests holds every request's state and every replica's busy spans at
once: more than 1 KiB a request (310 MiB for the 226,000 requests of a day of 8-device pools), so about 8 GiB
for the 5.9 million of a week of 32-device pools. A chunk's replay serves OVERLAP_MS of the
requests before and after it too, so its replicas start as loaded as they were and its last requests still
meet the arrivals that followed them; it keeps the rows of its own requests and the busy time inside its own
span. Queues on the demo's pools drain within seconds (the longest TTFT is a few seconds, the longest request
about a minute and a half), so ten minutes either side is far more than the state a chunk inherits.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from itertools import pairwise

import polars as pl

from canonical.timeunits import HOUR_MS, MINUTE_MS
from pool_registry import Registry
from replay import Candidate, run_replay

CHUNK_MS = 6 * HOUR_MS
OVERLAP_MS = 10 * MINUTE_MS
# the replay's row columns the demo reads (and `images`, 0 for a chunk without any); the rest are dropped as each
# chunk is done
ROW_COLUMNS = ("seq", "arrival_ms", "in_tokens", "out_tokens", "cached_tokens", "sla_tier", "model", "pool",
               "replica", "ttft_s", "tpot_s", "wait_s")

Progress = Callable[[float, str], None]


@dataclass(frozen=True)
class ChunkedReplay:
    """The replay's rows of every request (in the traffic's order) and every replica's busy spans."""

    requests: pl.DataFrame
    busy: pl.DataFrame


def chunk_edges(start_ms: int, end_ms: int, chunk_ms: int = CHUNK_MS) -> list[tuple[int, int]]:
    """[lo, hi) spans of chunk_ms from start_ms, the last one ending at end_ms."""
    return list(pairwise([*range(start_ms, end_ms, chunk_ms), end_ms]))


def replay_in_chunks(candidate: Candidate, traffic: pl.DataFrame, fleet: Registry, start_ms: int, end_ms: int,
                     progress: Progress | None = None, chunk_ms: int = CHUNK_MS,
                     overlap_ms: int = OVERLAP_MS) -> ChunkedReplay:
    """Replay `traffic` (with a `seq` column numbering its rows from 0) chunk by chunk over [start_ms, end_ms)."""
    say = progress or (lambda _f, _m: None)
    edges = chunk_edges(start_ms, end_ms, chunk_ms)
    rows: list[pl.DataFrame] = []
    spans: list[pl.DataFrame] = []
    arrival = pl.col("arrival_ms")
    for i, (lo, hi) in enumerate(edges):
        say(i / len(edges), f"serving requests, part {i + 1} of {len(edges)}")
        part = traffic.filter(arrival.is_between(lo - overlap_ms, hi + overlap_ms, closed="left"))
        if not part.filter(arrival.is_between(lo, hi, closed="left")).height:
            continue
        result = run_replay(candidate, part, fleet, seed=0)
        done = result.requests.filter(arrival.is_between(lo, hi, closed="left"))
        rows.append(done.select(*ROW_COLUMNS, pl.col("images").cast(pl.Int64) if "images" in done.columns  # images:
                                else pl.lit(0, pl.Int64).alias("images")))                     # none in the chunk
        # the chunk owns the busy time inside [lo, hi); the next chunk's replay accounts for what follows
        owned = result.busy.with_columns(pl.col("start_ms").clip(lower_bound=lo), pl.col("end_ms").clip(upper_bound=hi))
        spans.append(owned.filter(pl.col("end_ms") > pl.col("start_ms")))
        del result, part
    say(1.0, "requests served")
    requests = pl.concat(rows).sort("seq") if rows else pl.DataFrame()
    busy = pl.concat(spans) if spans else pl.DataFrame(schema={"pool": pl.String, "replica": pl.Int64,
                                                               "start_ms": pl.Float64, "end_ms": pl.Float64})
    return ChunkedReplay(requests, busy)
