"""One continuously batching replica, stepped in closed form from event to event.

The replica is a package of four small parts, one class each, every one extending the one before:
- `state.py`: what it holds (batch, queue, KV cache, the current run, its books);
- `schedule.py`: which sequences the next run computes, admission and preemption, and when the run ends;
- `events.py`: arrivals, run ends, completions, failures and repairs;
- `estimates.py`: what routers read (predicted TTFT and e2e, the wait for admission).
Every pass time is the one step model's (replay/step.py).
"""

from replay import native

native.extend(__path__, __name__)

from replay.replica.estimates import Replica  # noqa: E402  (after the compiled build is put first on the path)
from replay.replica.state import INF  # noqa: E402

__all__ = ["INF", "Replica"]
