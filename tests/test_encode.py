"""A request's images in the replay: the vision encoder's time before its prefill, the images' tokens in its prefill
and KV, TTFT split into encode, queue and prefill; worked by hand. A trace without images replays as before, and
images sent to a model without an encoder are refused with their reason."""

from __future__ import annotations

import dataclasses

import numpy as np
import polars as pl
import pytest

from pool_registry import Registry
from pool_registry.vision import Vision
from replay import encode
from replay.candidate import Candidate
from replay.costmodel import step_model
from replay.engine import run_replay
from replay.fleet import resolve_pools
from tests.replay_fleets import fleet, model, pool

# The chip: 1000 TFLOP/s and 4 TB/s; the pool: one replica of one device at mfu 0.5 and mem_bw_eff 0.5, no engine
# time. The model: 10B dense in BF16 (20e9 B of weights), KV 2 x 10 layers x 8 heads x 128 x 2 B = 40,960 B a token;
# its encoder: 1B parameters, 448 px images in 14 px patches, (448 / 14)^2 = 1024 patches making 256 tokens.
#   s_per_token = 2 x 10e9 / (1000e12 x 0.5)  = 4e-5 s          a prompt token
#   s_per_patch = 4e-5 x 1B / 10B             = 4e-6 s          an image patch (2 x 1e9 FLOPs at the same rate)
#   memory      = 20e9 B / (4e12 x 0.5 B/s)   = 0.01 s          a pass's weights
# One request of 1000 text tokens and two images, one output token after its first:
#   image tokens = 2 x 256 = 512; prompt = 1512 tokens; patches = 2 x 1024 = 2048
#   encoder      = 2048 x 4e-6                = 0.008192 s
#   prefill      = max(0.01, 1512 x 4e-5)     = 0.06048 s (compute-bound), in the same pass after the encoder
#   TTFT         = 0.008192 + 0.06048         = 0.068672 s
#   KV           = 1512 prompt + 1 first token + 1 decoded = 1514 tokens at its peak, 1514 x 40,960 B
# The same request without images: TTFT = 1000 x 4e-5 = 0.04 s, KV peak 1002 tokens. The difference,
# 0.028672 s, is exactly the encoder's 0.008192 s and the 512 image tokens' 512 x 4e-5 = 0.02048 s.
VISION = Vision(encoder_params_b=1.0, encoder_layers=24, hidden_size=1024, patch_size=14, image_size=448,
                tokens_per_image=256)
ENCODER_S = 2048 * 4e-6
TTFT_IMAGES, TTFT_TEXT = 0.008192 + 1512 * 4e-5, 1000 * 4e-5


def vlm_fleet() -> Registry:
    return fleet(pool("v"), models=(dataclasses.replace(model(), vision=VISION),))


def traffic(**columns: list[int]) -> pl.DataFrame:
    n = len(next(iter(columns.values()))) if columns else 1
    base = {"arrival_ms": [1_000 * k for k in range(n)], "in_tokens": [1000] * n, "out_tokens": [2] * n}
    return pl.DataFrame({**base, **columns})


def test_the_rates_are_the_step_models() -> None:
    spec = resolve_pools(vlm_fleet(), Candidate(name="c"))[0]
    step = step_model(spec)
    assert step.s_per_token == pytest.approx(4e-5)
    assert encode.seconds_per_patch(step, spec.model) == pytest.approx(4e-6)
    assert encode.seconds_per_patch(step, model()) == 0.0
    # the encoder's 2e9 B count in memory: (72e9 - 20e9 - 2e9) / 40,960 tokens of KV
    assert spec.kv_capacity_tokens == int(50e9 // 40_960)


def test_two_images_cost_the_encoder_and_their_tokens_and_nothing_else() -> None:
    reg = vlm_fleet()
    with_images = run_replay(Candidate(name="c"), traffic(images=[2]), reg)
    without = run_replay(Candidate(name="c"), traffic(images=[0]), reg)
    row = with_images.requests.row(0, named=True)
    assert row["image_tokens"] == 512 and row["images"] == 2
    assert row["ttft_s"] == pytest.approx(TTFT_IMAGES, rel=1e-12)
    assert row["encode_s"] == pytest.approx(ENCODER_S, rel=1e-12)
    assert row["prefill_s"] == pytest.approx(1512 * 4e-5, rel=1e-12)
    assert row["wait_s"] == 0.0
    plain = without.requests.row(0, named=True)
    assert plain["ttft_s"] == pytest.approx(TTFT_TEXT, rel=1e-12)
    assert row["ttft_s"] - plain["ttft_s"] == pytest.approx(ENCODER_S + 512 * 4e-5, rel=1e-9)
    # the decode pass reads the weights and the KV of 1513 tokens: 0.01 + 1513 x 40,960 x 5e-13 s
    assert row["e2e_s"] - row["ttft_s"] == pytest.approx(0.01 + 1513 * 40_960 * 5e-13, rel=1e-9)
    capacity = int(50e9 // 40_960)
    assert with_images.summary.pools["v"].kv_peak * capacity == pytest.approx(1514)
    assert without.summary.pools["v"].kv_peak * capacity == pytest.approx(1002)
    assert with_images.summary.tokens_in == 1512 and without.summary.tokens_in == 1000
    pool_row = with_images.summary.pools["v"]
    assert (pool_row.images, pool_row.encode_s) == (2, pytest.approx(ENCODER_S))
    assert pool_row.encode_share == pytest.approx(ENCODER_S / with_images.summary.pools["v"].busy_s)
    split = with_images.summary.ttft_split
    assert split == pytest.approx({"encode_s": ENCODER_S, "queue_s": 0.0, "prefill_s": 1512 * 4e-5})
    assert sum(split.values()) == pytest.approx(row["ttft_s"])


def test_image_tokens_given_by_the_trace_are_taken_and_their_patches_follow_the_encoder_ratio() -> None:
    out = run_replay(Candidate(name="c"), traffic(image_tokens=[300]), vlm_fleet()).requests.row(0, named=True)
    # 300 tokens at 1024 / 256 = 4 patches a token: 1200 patches, 1200 x 4e-6 s; prefill 1300 x 4e-5 s
    assert out["encode_s"] == pytest.approx(1200 * 4e-6)
    assert out["ttft_s"] == pytest.approx(1200 * 4e-6 + 1300 * 4e-5)


def test_a_trace_without_images_replays_to_the_bit_as_one_with_no_images() -> None:
    reg = vlm_fleet()
    rng = np.random.default_rng(5)
    n = 60
    base = pl.DataFrame({"arrival_ms": np.sort(rng.integers(0, 20_000, n)), "in_tokens": rng.integers(10, 4000, n),
                         "out_tokens": rng.integers(1, 300, n)})
    plain = run_replay(Candidate(name="c"), base, reg)
    zeros = run_replay(Candidate(name="c"), base.with_columns(pl.lit(0).alias("images"),
                                                              pl.lit(0).alias("image_tokens")), reg)
    assert plain.requests.equals(zeros.requests)
    assert "encode_s" not in plain.requests.columns and plain.summary.ttft_split == {}
    assert plain.summary.to_dict() == zeros.summary.to_dict()


def test_images_waiting_behind_a_batch_are_encoded_on_the_replica_that_serves_them() -> None:
    """Two requests arrive together on one replica of concurrency 2: both prompts and both encoders run in its
    first pass, compute-bound: 2 x 2048 patches x 4e-6 + 2 x 1512 x 4e-5 s."""
    reg = fleet(dataclasses.replace(pool("v"), serving=dataclasses.replace(pool("v").serving,  # type: ignore[arg-type]
                                                                            max_concurrency=2)),
                models=(dataclasses.replace(model(), vision=VISION),))
    frame = pl.DataFrame({"arrival_ms": [0, 0], "in_tokens": [1000, 1000], "out_tokens": [2, 2], "images": [2, 2]})
    rows = run_replay(Candidate(name="c"), frame, reg).requests
    assert rows["ttft_s"].to_list() == pytest.approx([2 * ENCODER_S + 2 * 1512 * 4e-5] * 2)
    assert rows["encode_s"].to_list() == pytest.approx([ENCODER_S] * 2)


def test_images_sent_to_a_model_without_an_encoder_are_rejected_with_their_reason() -> None:
    result = run_replay(Candidate(name="c", overflow="reject"), traffic(images=[3, 0]), fleet(pool("t")))
    rows = result.requests
    assert rows["outcome"].to_list() == ["rejected", "served"]
    assert rows["reason"][0] == ("the request carries 3 images, but model m has no vision encoder (no 'vision' in "
                                 "the registry)")
    tokens_only = run_replay(Candidate(name="c", overflow="reject"), traffic(image_tokens=[40]), fleet(pool("t")))
    assert "carries 40 image tokens" in str(tokens_only.requests["reason"][0])


def test_the_replay_text_and_the_replay_pages_pool_table_show_the_encoders_share() -> None:
    from app.console.whatif.results import pool_table
    from replay.whatif import summary_lines

    with_images = run_replay(Candidate(name="c"), traffic(images=[2]), vlm_fleet()).summary
    text_only = run_replay(Candidate(name="c"), traffic(images=[0]), vlm_fleet()).summary
    lines = summary_lines([("images", with_images)])
    assert ["ttft", "encode/queue/pf", "0.008s/0.000s/0.060s"] in [line.split() for line in lines]
    # busy: the first pass 0.068672 s and the decode pass 0.01 + 1513 x 40,960 x 5e-13 s = 0.010030986 s
    share = ENCODER_S / (TTFT_IMAGES + 0.01 + 1513 * 40_960 * 5e-13)
    assert with_images.pools["v"].encode_share == pytest.approx(share)
    assert ["encoder", "s", "/", "share", "v", "0.008s", "/", f"{share * 100:.1f}%"] in [line.split() for line in lines]
    # every line's columns start where the header's do: the widest cell sets them
    assert len({len(line) for line in lines if not line.startswith("note")}) == 1
    assert not any(line.startswith("ttft encode") for line in summary_lines([("text", text_only)]))
    table = pool_table([("images", with_images)])
    assert table.select("images", "encoder share").row(0) == (2, pytest.approx(share))
    assert "encoder share" not in pool_table([("text", text_only)]).columns


def test_routers_rank_a_pool_with_its_encoders_cost_for_the_images_a_request_carries() -> None:
    """The full-batch cost a router ranks pools by: a request of 1000 text tokens and two images costs what one of
    1512 text tokens costs, plus its 2048 patches x 4e-6 s of the encoder at the replica's $1/3600 a second."""
    from replay.engine import prepare_traffic
    from replay.plan import build_plan

    spec = resolve_pools(vlm_fleet(), Candidate(name="c"))
    images = build_plan(prepare_traffic(traffic(images=[2])), spec, Candidate(name="c"), np.random.default_rng(0))
    text = build_plan(prepare_traffic(pl.DataFrame({"arrival_ms": [0], "in_tokens": [1512], "out_tokens": [2]})),
                      spec, Candidate(name="c"), np.random.default_rng(0))
    assert images.patches == [2048] and images.in_tokens.tolist() == [1512.0]
    assert images.rank_cost[0, 0] - text.rank_cost[0, 0] == pytest.approx(2048 * 4e-6 / 3600, rel=1e-9)
