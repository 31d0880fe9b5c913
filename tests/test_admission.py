"""Admission by what a gateway knows (replay/constraints.py): a request is refused for its size only when its prompt
(plus the max_tokens its client sent) cannot fit; a predicted output length never refuses one."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from replay import Candidate, SlaTier, run_replay
from replay.candidate import PredictorSpec
from replay.constraints import needed_context
from replay.policies import POLICIES
from replay.predictors import PREDICTORS
from tests.replay_fleets import fleet, model, pool

WINDOW = 4096
# two pools of a 4,096-token model, as the Llama-2-70B deployments of 2023 served it
NARROW = fleet(pool("a", replicas=2, concurrency=16, cost=1.0), pool("b", replicas=2, concurrency=16, cost=2.0),
               models=(model(max_context=WINDOW),))
PREDICTOR_OPTIONS = {"fixed": {"tokens": 256}, "table": {"tiers": {"standard": 300}, "default": 256}}


def near_the_window(n: int = 120, seed: int = 3) -> pl.DataFrame:
    """Prompts of 3,900 to 4,095 tokens (each leaves room for at least one output token) and outputs of 1 to 600
    tokens: most cannot finish inside the window, and a prediction of 256 tokens never fits beside them."""
    rng = np.random.default_rng(seed)
    return pl.DataFrame({"arrival_ms": np.cumsum(rng.integers(50, 400, n)), "in_tokens": rng.integers(3900, 4096, n),
                         "out_tokens": rng.integers(1, 600, n)})


def _candidate(policy: str, predictor: str) -> Candidate:
    options = {"prefill": ("a",), "decode": ("b",)} if policy == "pd_split" else {}
    return Candidate(name="c", policy=policy, policy_options=options,
                     predictor=PredictorSpec(predictor, PREDICTOR_OPTIONS.get(predictor, {})),
                     sla_tiers={"standard": SlaTier(ttft_s=30.0, e2e_s=600.0)})


@pytest.mark.parametrize("predictor", sorted(PREDICTORS))
@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_prompts_that_nearly_fill_the_window_are_served_or_truncated_never_refused(policy: str,
                                                                                   predictor: str) -> None:
    traffic = near_the_window()
    if policy == "observed":  # it replays the trace's own routing
        traffic = traffic.with_columns(pl.lit("a").alias("obs_pool"))
    result = run_replay(_candidate(policy, predictor), traffic, NARROW, 0)
    rows = result.requests
    assert rows.filter(pl.col("outcome") == "rejected").height == 0, rows["reason"].drop_nulls().to_list()[:3]
    assert rows.filter(pl.col("outcome") == "served").height == traffic.height
    # an output that outgrows the window stops there, as an engine stops at max_model_len
    over = traffic.filter(pl.col("in_tokens") + pl.col("out_tokens") > WINDOW).height
    assert over > traffic.height // 2 and result.summary.truncated == over


@pytest.mark.parametrize(("prompt", "max_tokens", "reason"), [
    (4096, None, "prompt of 4,096 tokens and one output token exceed every model window (largest 4,096)"),
    (9000, None, "prompt of 9,000 tokens and one output token exceed every model window (largest 4,096)"),
    (4000, 97, "prompt of 4,000 tokens plus max_tokens 97 exceed every model window (largest 4,096)"),
])
def test_what_the_client_sent_refuses_a_request_and_says_so(prompt: int, max_tokens: int | None,
                                                            reason: str) -> None:
    traffic = pl.DataFrame({"arrival_ms": [0, 10], "in_tokens": [prompt, 4000], "out_tokens": [50, 50],
                            "max_tokens": [max_tokens, 96]}, schema_overrides={"max_tokens": pl.Int64})
    rows = run_replay(_candidate("cost_min", "online"), traffic, NARROW, 0).requests
    assert rows["outcome"].to_list() == ["rejected", "served"]  # 4,000 + 96 = 4,096 fits exactly
    assert rows["reason"][0] == reason


def test_a_pool_the_prediction_fits_ranks_before_a_cheaper_one_it_does_not() -> None:
    """The cheap pool's window (4,096) holds the prompt but not the predicted 512 tokens beside it; the dearer pool's
    (32,768) holds both: the router prefers the dearer one, and takes the cheap one for short prompts."""
    reg = fleet(pool("cheap", concurrency=8, cost=1.0, model_id="m"), pool("wide", concurrency=8, cost=3.0,
                                                                            model_id="m"),
                models=(model(max_context=WINDOW),))
    wide = fleet(pool("wide", concurrency=8, cost=3.0, model_id="w"), models=(model("w", max_context=32_768),))
    both = fleet(*reg.pools[:1], *wide.pools, models=(model("m", max_context=WINDOW), model("w", max_context=32_768)))
    traffic = pl.DataFrame({"arrival_ms": [0, 1000], "in_tokens": [3800, 500], "out_tokens": [400, 400]})
    cand = Candidate(name="c", policy="cost_min", predictor=PredictorSpec("fixed", {"tokens": 512}))
    rows = run_replay(cand, traffic, both, 0).requests
    assert rows["pool"].to_list() == ["wide", "cheap"]
    assert rows["outcome"].to_list() == ["served", "served"]


@pytest.mark.parametrize(("prompt", "max_tokens", "need"), [(100, 0, 101), (100, 50, 150), (0, 0, 1), (7, 1, 8)])
def test_the_context_a_request_needs(prompt: int, max_tokens: int, need: int) -> None:
    assert needed_context(np.array([prompt]), np.array([max_tokens])).tolist() == [need]
