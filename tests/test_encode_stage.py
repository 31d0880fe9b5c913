"""pd_split's encode stage: images encoded on an encode pool, their embeddings moved to the prefill pool, then
prefill and decode as before; worked by hand on the fleet of tests/test_encode.py."""

from __future__ import annotations

import dataclasses

import polars as pl
import pytest

from pool_registry import Registry
from replay.candidate import Candidate, SlaTier
from replay.candidate_loader import load_candidate_text
from replay.engine import run_replay
from replay.exceptions import CandidateError, ReplayError
from tests.replay_fleets import chip, fleet, model, pool
from tests.test_encode import ENCODER_S, VISION

# Every pool: one replica of one device of the default chip (1000 TFLOP/s, 4 TB/s, 100 GB/s links) at mfu 0.5 and
# mem_bw_eff 0.5, serving the 10B VLM of tests/test_encode.py with a declared hidden size of 4096.
# One request of 1000 text tokens and two images (512 image tokens, 2048 patches), two output tokens:
#   encode      = 2048 x 4e-6                       = 0.008192 s        on pool enc
#   embeddings  = 512 x 4096 x 2 B / 100e9 B/s      = 4.194304e-5 s     enc -> pre
#   prefill     = 1512 x 4e-5                       = 0.06048 s         on pool pre, nothing left to encode
#   TTFT        = 0.008192 + 4.194304e-5 + 0.06048  = 0.06871394304 s
#   KV          = 1512 x 40,960 B / 100e9 B/s       = 6.193152e-4 s     pre -> dec
#   decode      = 0.01 + 1513 x 40,960 x 5e-13      = 0.010030986 s     one pass on dec
# Encoded on the prefill replica instead (no encode pool) the TTFT is 0.008192 + 0.06048 s: the stage adds exactly
# the embeddings' way.
EMBED_S = 512 * 4096 * 2 / 100e9
PREFILL_S = 1512 * 4e-5
KV_S = 1512 * 40_960 / 100e9
DECODE_S = 0.01 + 1513 * 40_960 * 5e-13
VLM = dataclasses.replace(model(), vision=VISION, hidden_size=4096)
EPD = Candidate(name="epd", policy="pd_split",
                policy_options={"prefill": ("pre",), "decode": ("dec",), "encode": ("enc",)})
PD = Candidate(name="pd", policy="pd_split", policy_options={"prefill": ("pre",), "decode": ("dec",)})


def epd_fleet(*, encoders: int = 1, others: int = 1) -> Registry:
    """The three stages' pools: `encoders` replicas to encode, `others` each to prefill and to decode."""
    return fleet(pool("enc", replicas=encoders), pool("pre", replicas=others), pool("dec", replicas=others),
                 models=(VLM,))


def requests(n: int = 1, images: int = 2) -> pl.DataFrame:
    return pl.DataFrame({"arrival_ms": [0] * n, "in_tokens": [1000] * n, "out_tokens": [2] * n, "images": [images] * n})


def test_images_are_encoded_apart_and_their_embeddings_cross_to_the_prefill_pool_by_hand() -> None:
    result = run_replay(EPD, requests(), epd_fleet())
    row = result.requests.row(0, named=True)
    assert (row["pool"], row["decode_pool"]) == ("pre", "dec")
    assert row["ttft_s"] == pytest.approx(ENCODER_S + EMBED_S + PREFILL_S, rel=1e-12)
    assert row["encode_s"] == pytest.approx(ENCODER_S, rel=1e-12)
    assert row["wait_s"] == 0.0
    assert row["prefill_s"] == pytest.approx(EMBED_S + PREFILL_S, rel=1e-12)  # the embeddings' way is before it
    assert row["e2e_s"] == pytest.approx(ENCODER_S + EMBED_S + PREFILL_S + KV_S + DECODE_S, rel=1e-12)
    # each stage's busy seconds at $1 an hour, the encoder's among them
    assert row["cost_usd"] == pytest.approx((ENCODER_S + PREFILL_S + DECODE_S) / 3600, rel=1e-9)
    pools = result.summary.pools
    assert (pools["enc"].busy_s, pools["enc"].encode_share, pools["enc"].images) == (
        pytest.approx(ENCODER_S), pytest.approx(1.0), 2)
    assert pools["enc"].requests == 0  # it computed no prompt
    assert (pools["pre"].busy_s, pools["pre"].encode_share, pools["pre"].images) == (pytest.approx(PREFILL_S), 0.0, 0)
    assert result.summary.ttft_split == pytest.approx(
        {"encode_s": ENCODER_S, "queue_s": 0.0, "prefill_s": EMBED_S + PREFILL_S})


def test_without_an_encode_pool_the_prefill_replica_encodes_and_the_difference_is_the_embeddings_way() -> None:
    apart = run_replay(EPD, requests(), epd_fleet()).requests.row(0, named=True)
    here = run_replay(PD, requests(), epd_fleet()).requests.row(0, named=True)
    assert here["ttft_s"] == pytest.approx(ENCODER_S + PREFILL_S, rel=1e-12)
    assert apart["ttft_s"] - here["ttft_s"] == pytest.approx(EMBED_S, rel=1e-6)


def test_the_second_request_waits_for_the_one_encoder_and_not_for_a_prefill() -> None:
    """Two arrive together: the one encode replica takes them in turn; the second prefill and decode replicas are
    free."""
    rows = run_replay(EPD, requests(2), epd_fleet(others=2)).requests
    assert rows["ttft_s"].to_list() == pytest.approx([ENCODER_S + EMBED_S + PREFILL_S,
                                                      2 * ENCODER_S + EMBED_S + PREFILL_S], rel=1e-12)
    assert rows["wait_s"].to_list() == pytest.approx([0.0, ENCODER_S], rel=1e-12)
    assert rows["encode_s"].to_list() == pytest.approx([ENCODER_S] * 2, rel=1e-12)
    assert sorted(rows["replica"].to_list()) == [0, 1]
    # two encode replicas: neither waits
    both = run_replay(EPD, requests(2), epd_fleet(encoders=2, others=2)).requests
    assert both["wait_s"].to_list() == [0.0, 0.0]


def test_text_requests_never_go_to_the_encode_pool() -> None:
    rows = run_replay(EPD, requests(3, images=0), epd_fleet()).requests
    assert set(rows["pool"].to_list()) == {"pre"} and set(rows["decode_pool"].to_list()) == {"dec"}
    # served whole where no prefill pool serves their model: on a serving pool, never the encoder
    other = dataclasses.replace(model("o"), hidden_size=4096)
    reg = fleet(pool("enc"), pool("pre"), pool("dec"), pool("o", model_id="o"), models=(VLM, other))
    frame = pl.DataFrame({"arrival_ms": [0, 0], "in_tokens": [100, 100], "out_tokens": [2, 2], "model": ["o", "o"]})
    assert run_replay(EPD, frame, reg).requests["pool"].to_list() == ["o", "o"]


def test_the_time_spent_encoding_counts_against_the_ttft_limit() -> None:
    """The second request's limit holds its prefill alone (0.0605 s) but not with its wait for the encoder."""
    limit = ENCODER_S + EMBED_S + PREFILL_S + 1e-4
    cand = dataclasses.replace(EPD, sla_tiers={"standard": SlaTier(ttft_s=limit)}, overflow="reject")
    rows = run_replay(cand, requests(2), epd_fleet(others=2)).requests
    assert rows["outcome"].to_list() == ["served", "rejected"]


def test_the_encoder_runs_at_its_own_pools_speed() -> None:
    """An encode pool on a chip of twice the compute encodes in half the time; the prefill is unchanged."""
    reg = fleet(pool("enc", chip_id="fast"), pool("pre"), pool("dec"), models=(VLM,),
                chips=(chip(), chip("fast", tflops=2000.0)))
    row = run_replay(EPD, requests(), reg).requests.row(0, named=True)
    assert row["encode_s"] == pytest.approx(ENCODER_S / 2, rel=1e-12)
    assert row["ttft_s"] == pytest.approx(ENCODER_S / 2 + EMBED_S + PREFILL_S, rel=1e-12)


@pytest.mark.parametrize(("policy", "message"), [
    ("{name: pd_split, prefill: [pre], decode: [dec], encode: [pre]}",
     "policy 'pd_split' encode pool 'pre' is also a prefill or decode pool; an encode pool runs only the vision "
     "encoder"),
    ("{name: pd_split, prefill: [pre], decode: [dec], encode: [nope]}", "nope"),
    ("{name: pd_split, prefill: [pre], decode: [dec], encoder: [enc]}",
     "policy 'pd_split' has no option 'encoder'; options: prefill, decode, encode"),
])
def test_bad_encode_stages_are_refused_in_the_candidate_file(policy: str, message: str) -> None:
    with pytest.raises(CandidateError) as exc:
        load_candidate_text(f"policy: {policy}\n", epd_fleet(), "c.yaml")
    assert message in str(exc.value)


def test_an_encode_pool_whose_model_has_no_encoder_is_refused() -> None:
    reg = fleet(pool("enc", model_id="t"), pool("pre"), pool("dec"), models=(VLM, model("t")))
    with pytest.raises(ReplayError, match="pd_split encode pool 'enc' serves model 't', which has no vision encoder"):
        run_replay(EPD, requests(), reg)


def test_the_encode_option_round_trips_through_the_candidate_file() -> None:
    cand = load_candidate_text("policy: {name: pd_split, prefill: [pre], decode: [dec], encode: [enc]}\n",
                               epd_fleet(), "c.yaml")
    assert cand.policy_options == {"prefill": ("pre",), "decode": ("dec",), "encode": ("enc",)}
