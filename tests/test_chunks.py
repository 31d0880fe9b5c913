"""Chunk planning for Prometheus pulls: exact cover, aligned edges, and Prometheus' point limit."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from collectors.prometheus import MAX_POINTS_PER_SERIES, chunks


@given(st.integers(0, 10**13), st.integers(1, 10**9), st.sampled_from([1_000, 15_000, 60_000]),
       st.sampled_from([60_000, 3_600_000, 10**12]))
def test_chunks_cover_the_window_exactly(start: int, length: int, step: int, chunk: int) -> None:
    end = start + length
    windows = list(chunks(start, end, step, chunk))
    assert windows[0][0] == start and windows[-1][1] == end
    assert all(a[1] == b[0] for a, b in itertools.pairwise(windows))  # no gap, no overlap
    width = max(step, min(chunk, MAX_POINTS_PER_SERIES * step))
    assert all(0 < hi - lo <= width for lo, hi in windows)
    assert all(hi % width == 0 for _, hi in windows[:-1])  # edges do not depend on where a pull started


def test_three_days_at_15s_with_huge_chunks_stay_under_11000_points() -> None:
    windows = list(chunks(0, 3 * 86_400_000, 15_000, 10**12))
    assert max(hi - lo for lo, hi in windows) // 15_000 <= 11_000
    assert len(windows) == 2  # edges at multiples of 11,000 x 15 s = 45 h 50 min


def test_empty_window() -> None:
    assert list(chunks(5, 5, 15_000, 60_000)) == []
