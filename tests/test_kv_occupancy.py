"""KV occupancy as an operator sizing KV reads it: the share of capacity held at a quantile of replica time, idle
time holding none, and the peak, in the summary of a replay."""

from __future__ import annotations

import numpy as np
import pytest

from replay.summary import kv_quantile


def _hist(**seconds: float) -> np.ndarray:
    out = np.zeros(1001)  # tenths of a percent
    for b, s in seconds.items():
        out[int(b[1:])] = s
    return out


@pytest.mark.parametrize("hist, replica_s, q, share", [
    (_hist(b500=0.03), 0.10, 0.95, 0.501),  # 70 % idle (at 0), 30 % in [50.0, 50.1) %: p95 is in the busy part
    (_hist(b500=0.03), 0.10, 0.50, 0.001),  # but the median replica moment holds under a tenth of a percent
    (_hist(b200=1.0, b900=1.0), 2.0, 0.95, 0.901),
    (_hist(b200=1.0, b900=1.0), 2.0, 0.40, 0.201),
    (_hist(b1000=1.0), 1.0, 0.95, 1.0),      # the last bin is capacity itself
    (np.zeros(1001), 0.0, 0.95, 0.0),        # nothing ran and no window: nothing held
])
def test_a_quantile_of_replica_time_reads_the_histogram_with_idle_time(hist: np.ndarray, replica_s: float,
                                                                        q: float, share: float) -> None:
    assert kv_quantile(hist, replica_s, q) == pytest.approx(share)
