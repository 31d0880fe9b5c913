"""KV occupancy as an operator sizing KV reads it: the share of capacity held at a quantile of replica time, idle
time holding none, and the peak, in the summary of a replay."""

from __future__ import annotations

import numpy as np
import pytest

from replay.summary import kv_quantile


def _hist(**seconds: float) -> np.ndarray:
    out = np.zeros(101)
    for b, s in seconds.items():
        out[int(b[1:])] = s
    return out


@pytest.mark.parametrize("hist, replica_s, q, share", [
    (_hist(b50=0.03), 0.10, 0.95, 0.50),   # 70 % idle (at 0 %), 30 % at half: p95 is in the busy part
    (_hist(b50=0.03), 0.10, 0.50, 0.0),    # but the median replica moment holds nothing
    (_hist(b20=1.0, b90=1.0), 2.0, 0.95, 0.90),
    (_hist(b20=1.0, b90=1.0), 2.0, 0.40, 0.20),
    (_hist(b100=1.0), 1.0, 0.95, 1.0),     # the last bin is capacity itself
    (np.zeros(101), 0.0, 0.95, 0.0),       # nothing ran and no window: nothing held
])
def test_a_quantile_of_replica_time_reads_the_histogram_with_idle_time(hist: np.ndarray, replica_s: float,
                                                                        q: float, share: float) -> None:
    assert kv_quantile(hist, replica_s, q) == pytest.approx(share)
