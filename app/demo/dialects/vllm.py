"""vLLM V1 engine metrics: vllm: prefix, model_name and engine labels, the engine's own histogram bounds."""

from __future__ import annotations

from app.demo.dialects.base import EngineSlice
from app.demo.dialects.serving import counter, finished_reasons, gauge, histogram
from app.demo.expo import family, labels_text, render

TTFT_BOUNDS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
               40.0, 80.0, 160.0, 640.0, 2560.0)
E2E_BOUNDS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0,
              960.0, 1920.0, 7680.0)


class Vllm:
    """vLLM's Prometheus output for one engine."""

    profile: str = "vllm"
    ttft_bounds: tuple[float, ...] = TTFT_BOUNDS
    e2e_bounds: tuple[float, ...] = E2E_BOUNDS

    def render(self, es: EngineSlice) -> str:
        """Exposition text of the engine over the slice."""
        labels = [("engine", str(es.engine)), ("model_name", es.model)]
        reasons = finished_reasons(es)
        success = family("vllm:request_success", "Count of successfully processed requests.", "counter", {
            f"vllm:request_success_total{labels_text([*labels, ('finished_reason', r)])}": v
            for r, v in reasons.items()})
        return render([
            gauge("vllm:num_requests_running", "Number of requests in model execution batches.", labels, es.running),
            gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.", labels, es.waiting),
            gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", labels, es.kv_usage, 4),
            counter("vllm:prompt_tokens", "Number of prefill tokens processed.", labels, es.prompt_tokens),
            counter("vllm:generation_tokens", "Number of generation tokens processed.", labels,
                    es.generation_tokens),
            success,
            histogram("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", labels,
                      TTFT_BOUNDS, es.ttft),
            histogram("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", labels,
                      E2E_BOUNDS, es.e2e),
        ], es.ts_ms)


DIALECT = Vllm()
