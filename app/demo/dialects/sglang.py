"""SGLang metrics: sglang: prefix, model_name and rank labels, the current default histogram bounds."""

from __future__ import annotations

import numpy as np

from app.demo.dialects.base import EngineSlice
from app.demo.dialects.serving import counter, gauge, histogram, seen
from app.demo.expo import render

TTFT_BOUNDS = (0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 2.0, 4.0, 6.0, 8.0, 10.0, 20.0, 40.0, 60.0, 80.0, 100.0, 200.0, 400.0)
E2E_BOUNDS = (0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 2.0, 4.0, 6.0, 8.0, 10.0, 20.0, 40.0, 60.0, 80.0, 100.0, 200.0, 400.0,
              600.0, 1200.0, 1800.0, 2400.0)


class Sglang:
    """SGLang's Prometheus output for one server (tp/pp/dp rank 0 reports for the replica)."""

    profile: str = "sglang"
    ttft_bounds: tuple[float, ...] = TTFT_BOUNDS
    e2e_bounds: tuple[float, ...] = E2E_BOUNDS

    def render(self, es: EngineSlice) -> str:
        """Exposition text of the engine over the slice."""
        labels = [("dp_rank", str(es.engine)), ("model_name", es.model), ("pp_rank", "0"), ("tp_rank", "0")]
        total = np.sum(list(es.finished.values()), axis=0)
        aborted = es.finished.get("abort", np.zeros_like(total)) + es.finished.get("error", np.zeros_like(total))
        return render([
            gauge("sglang:num_running_reqs", "The number of running requests.", labels, es.running),
            gauge("sglang:num_queue_reqs", "The number of requests in the waiting queue.", labels, es.waiting),
            gauge("sglang:token_usage", "The token usage.", labels, es.kv_usage, 4),
            counter("sglang:prompt_tokens", "Number of prefill tokens processed.", labels, es.prompt_tokens),
            counter("sglang:generation_tokens", "Number of generation tokens processed.", labels,
                    es.generation_tokens),
            counter("sglang:num_requests", "Number of requests processed.", labels, total),
            counter("sglang:num_aborted_requests", "Number of requests aborted.", labels, seen(aborted)),
            histogram("sglang:time_to_first_token_seconds", "Histogram of time to first token in seconds.", labels,
                      TTFT_BOUNDS, es.ttft),
            histogram("sglang:e2e_request_latency_seconds", "Histogram of End-to-end request latency in seconds",
                      labels, E2E_BOUNDS, es.e2e),
        ], es.ts_ms)


DIALECT = Sglang()
