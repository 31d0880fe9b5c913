"""Output-length predictors: the registry, what each predicts, that the online one is causal and converges, the
oracle reproducing the replay as it was before predictors, and the candidate file's predictor key."""

from __future__ import annotations

import dataclasses

import numpy as np
import polars as pl
import pytest
import yaml

from pool_registry import Registry
from replay import Candidate, CandidateError, ReplayError, SlaTier, candidate_to_dict, load_candidate_text, run_replay
from replay.candidate import PredictorSpec
from replay.predictors import ORACLE_NOTE, PREDICTORS, UnknownNameError, get_predictor
from replay.predictors.online import length_bins, quantiles
from replay.whatif import predictor_said, summary_lines
from tests.replay_fleets import chip, fleet, model, pool


def test_registry_fails_helpfully() -> None:
    assert list(PREDICTORS) == ["online", "fixed", "table", "oracle"]
    with pytest.raises(UnknownNameError) as exc:
        get_predictor("x")
    assert str(exc.value) == "unknown predictor 'x'; known: online, fixed, table, oracle"
    assert Candidate(name="c").predictor == PredictorSpec("online", {})


# -- the oracle is the replay as it was -------------------------------------------------------------------------

REG = fleet(pool("a", chip_id="fast", replicas=2, concurrency=4, cost=3.0),
            pool("b", chip_id="slow", replicas=2, concurrency=8, cost=1.0),
            pool("c", chip_id="small", replicas=1, concurrency=6, cost=2.0),
            chips=(chip("fast", tflops=2000.0, bw_tbps=6.0, link_gbps=400.0), chip("slow", tflops=400.0, bw_tbps=2.0),
                   chip("small", hbm_gb=23.0, tflops=1000.0, bw_tbps=4.0)),  # a small KV cache: preemption
            models=(model("m"),))
TIERS = {"standard": SlaTier(ttft_s=1.0, e2e_s=20.0), "premium": SlaTier(ttft_s=0.3, e2e_s=6.0)}
RUNS = {
    "round_robin": Candidate(name="rr", policy="round_robin", sla_tiers=TIERS),
    "least_loaded": Candidate(name="ll", policy="least_loaded", sla_tiers=TIERS),
    "cost_min": Candidate(name="cm", policy="cost_min", sla_tiers=TIERS),
    "sla_cost": Candidate(name="sc", policy="sla_cost", sla_tiers=TIERS, noise=0.1),
    "pd_split": Candidate(name="pd", policy="pd_split", policy_options={"prefill": ("a",), "decode": ("b", "c")},
                          sla_tiers=TIERS),
}


def _regression_trace(n: int = 400, seed: int = 11) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    arrival = np.cumsum(rng.exponential(1 / 6.0, n))
    return pl.DataFrame({"arrival_ms": np.round(arrival * 1000).astype(np.int64),
                         "in_tokens": rng.integers(50, 4000, n), "out_tokens": rng.integers(5, 600, n),
                         "sla_tier": rng.choice(["standard", "premium"], n, p=[0.7, 0.3])})


# The pre-predictor engine's output (commit 1ab9fdf, before routers were given predicted lengths) for the trace
# above with seed 3: (sum of TTFT s, sum of e2e s, sum of cost $), requests preempted, served, each request's
# pool and decode pool. Routers then read the true output lengths, as the oracle predictor does now.
PRE_PREDICTOR = {
    "round_robin": ((558.398927490135, 2195.389996360962, 0.19317834561600014), 1, 400,
         "cabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabc"
         "abcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabca"
         "bcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcab"
         "cabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabc",
         "cabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabc"
         "abcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabca"
         "bcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcab"
         "cabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabc"),
    "least_loaded": ((56.532585434456166, 1551.1955856110965, 0.1895280610872891), 1, 400,
         "bcabbacbbabcccbabaaababbcaaacabaccaabbcabacbacbcbbabaaabcbabacabaaaaabcabaacababaabacaccaaaaaabbabcc"
         "aaaaabacbaacaccabacbbcbbaabaabcabbaaacbacbcaabbcabaacbaabbaabcbaabacababcacbcbacccacaaabbacaccbbbaca"
         "baaaaacbbabbacbbcaaccacbaabacaaacbabbaabcabbaaaaaaccacbbaacbbaabaacbabbabcbacacaabbcaacaaacacbabacba"
         "bbaaacaabcbabcbabcaaccabcaabbaaabacaabcaabaabaccbbabcbacacabacbacaaacbababcabaababaaabaaabcaaabacbba",
         "bcabbacbbabcccbabaaababbcaaacabaccaabbcabacbacbcbbabaaabcbabacabaaaaabcabaacababaabacaccaaaaaabbabcc"
         "aaaaabacbaacaccabacbbcbbaabaabcabbaaacbacbcaabbcabaacbaabbaabcbaabacababcacbcbacccacaaabbacaccbbbaca"
         "baaaaacbbabbacbbcaaccacbaabacaaacbabbaabcabbaaaaaaccacbbaacbbaabaacbabbabcbacacaabbcaacaaacacbabacba"
         "bbaaacaabcbabcbabcaaccabcaabbaaabacaabcaabaabaccbbabcbacacabacbacaaacbababcabaababaaabaaabcaaabacbba"),
    "cost_min": ((19696.416844225285, 22499.795522109016, 0.11116845941013309), 0, 400,
         "bbbcbbabbbbbbbbbbcbbbbbbbbbbbbbabcbbbbbbbcbbbbbbbbbbbbbbbbbbabbbabbbbbbcbbbbbbbbacbbbbbbbbabbbbbbbbb"
         "bbbbbbbbbbbcbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbcbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
         "bbcbbbbbbbbbbbbbbbbbbbbbbbbbababbbbbcbbbbacbbbcbbbbbbbbbbbbbbbbbbbbbabbbbcbbbbbbbbcbcbcbbbbcbbbbbabb"
         "bbbbbbbbbbbbbbbcbbbbbbbcbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbcbbbbbbbabbbbbbbb",
         "bbbcbbabbbbbbbbbbcbbbbbbbbbbbbbabcbbbbbbbcbbbbbbbbbbbbbbbbbbabbbabbbbbbcbbbbbbbbacbbbbbbbbabbbbbbbbb"
         "bbbbbbbbbbbcbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbcbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
         "bbcbbbbbbbbbbbbbbbbbbbbbbbbbababbbbbcbbbbacbbbcbbbbbbbbbbbbbbbbbbbbbabbbbcbbbbbbbbcbcbcbbbbcbbbbbabb"
         "bbbbbbbbbbbbbbbcbbbbbbbcbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbcbbbbbbbabbbbbbbb"),
    "sla_cost": ((165.22687249320902, 1825.1413111389297, 0.17106102857071373), 5, 400,
         "bbbcbbabbbcbbbbbbcbbbbcbbccbcccaccbbaccaaaabbbbcccaaababbaaaaaaaababccaaaabbaabcacaabcbbcbabccccaaab"
         "bbcaabbccababbbccabbbbccaccbcbbcabaccaaabbcbbcaccabaaabcaabbacacabbbbcbbbcbcacbbbcbcbcbaabcccababaaa"
         "abcccabcbcccaacbaaabbbbcaaaaababbbcbccabcaabcccbcabaaababaabbccbbccaabbbaccabbbcbcaaabcbacaaabbaaabb"
         "bccaaabaabaaabcaabbcbccaabbcabaabaaabbbbccccacbbaaaaaacaaabbaabbcbaaaaabbaaaaaabbbbccccaaababbcbbbbb",
         "bbbcbbabbbcbbbbbbcbbbbcbbccbcccaccbbaccaaaabbbbcccaaababbaaaaaaaababccaaaabbaabcacaabcbbcbabccccaaab"
         "bbcaabbccababbbccabbbbccaccbcbbcabaccaaabbcbbcaccabaaabcaabbacacabbbbcbbbcbcacbbbcbcbcbaabcccababaaa"
         "abcccabcbcccaacbaaabbbbcaaaaababbbcbccabcaabcccbcabaaababaabbccbbccaabbbaccabbbcbcaaabcbacaaabbaaabb"
         "bccaaabaabaaabcaabbcbccaabbcabaabaaabbbbccccacbbaaaaaacaaabbaabbcbaaaaabbaaaaaabbbbccccaaababbcbbbbb"),
    "pd_split": ((17.018019999999975, 6080.013149568853, 0.11720410456106661), 8, 400,
         "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
         "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
         "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
         "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
         "bbbcbbcbbbbbbbbbbcbbbbcbbbbbbbbcccbbcbbbbcbbbbbbbbbbbbcbbbcccccbcbcbcbccccbbccbbccccbccbcbcbbbbbbcbb"
         "bbcccbbbbcbcbbbbcbbbbbbbcccbcbbccccbbbcccbcbbccbbcbcccbbbbbbbbbcccbcbbcbbcbcbcbbccbbbcbccbbcccbcbbbb"
         "cbccbcbcbbbbbccbcbbbcbbccbcccbbbbbbbcbbcbccbbccbbbbcbcbbccbcbbbbbbcbcbbbccbbbbbbbbcbcccbbbccbbbbcbcb"
         "bbcbbbcbbbcbbbcbcbcbcbbbbccbbbbbbcbbcbbbbcbbccbbbbbbbbcbbbbbcbbbcbcbbbbccbbbbbbbbccbbbcccbcbbbbbbbbb"),
}


@pytest.mark.parametrize("policy", list(RUNS))
def test_the_oracle_reproduces_the_pre_predictor_engine(policy: str) -> None:
    cand = dataclasses.replace(RUNS[policy], predictor=PredictorSpec("oracle"))
    result = run_replay(cand, _regression_trace(), REG, 3)
    r = result.requests
    sums, preempted, served, pools, decode = PRE_PREDICTOR[policy]
    assert (r["ttft_s"].sum(), r["e2e_s"].sum(), r["cost_usd"].sum()) == pytest.approx(sums, rel=1e-12, abs=0)
    assert (int(r["preempted"].sum()), r["outcome"].to_list().count("served")) == (preempted, served)
    assert "".join(r["pool"].fill_null("-").to_list()) == pools
    assert "".join(r["decode_pool"].fill_null("-").to_list()) == decode
    s = result.summary
    assert (s.predictor, s.predictor_note, s.predictor_ape_p50, s.predictor_ape_p90) == ("oracle", ORACLE_NOTE, 0, 0)
    assert r["pred_out_tokens"].equals(r["out_tokens"].alias("pred_out_tokens"))


# -- what each predicts ---------------------------------------------------------------------------------------

FLAT = fleet(pool("p", replicas=4, concurrency=16))


def _lognormal_tiers(n: int, medians: dict[str, float], sigma: float = 0.7, rate: float = 4.0,
                     seed: int = 2) -> pl.DataFrame:
    """Output lengths lognormal with a median per tier; prompts of 1024-2046 tokens (one prompt bucket), at a
    rate the pool serves without queueing."""
    rng = np.random.default_rng(seed)
    tiers = rng.choice(list(medians), n)
    mu = np.log(np.array([medians[t] for t in tiers]))
    return pl.DataFrame({"arrival_ms": np.round(np.cumsum(rng.exponential(1 / rate, n)) * 1000).astype(np.int64),
                         "in_tokens": rng.integers(1024, 2047, n),
                         "out_tokens": np.maximum(1, np.round(np.exp(rng.normal(mu, sigma)))).astype(np.int64),
                         "sla_tier": tiers})


MEDIANS = {"standard": 120.0, "premium": 400.0, "batch": 1500.0}


@pytest.mark.parametrize(("quantile", "z"), [(0.5, 0.0), (0.9, 1.2815516)])
def test_the_online_predictor_converges_to_each_tiers_quantile(quantile: float, z: float) -> None:
    """Output lengths lognormal with a different median per tier (sigma 0.7): once thousands have completed
    (about 4,000 a tier), every prediction of the last 4,000 arrivals is within 3.5 % of its tier's quantile
    exp(mu + z sigma), the sampling error of a quantile of 4,000 draws included."""
    traffic = _lognormal_tiers(16_000, MEDIANS)
    cand = Candidate(name="o", policy="cost_min", predictor=PredictorSpec("online", {"quantile": quantile}))
    rows = run_replay(cand, traffic, FLAT, 0).requests
    late = rows.tail(4000)
    for tier, median in MEDIANS.items():
        pred = late.filter(pl.col("sla_tier") == tier)["pred_out_tokens"].to_numpy()
        truth = median * np.exp(z * 0.7)
        assert np.abs(pred / truth - 1).max() < 0.035, (tier, truth, np.median(pred))


def test_online_starts_from_history_then_the_default() -> None:
    traffic = pl.DataFrame({"arrival_ms": [0, 10], "in_tokens": [100, 3000], "out_tokens": [5, 5],
                            "sla_tier": ["standard", "premium"]})
    cold = run_replay(Candidate(name="o", policy="cost_min"), traffic, FLAT, 0).requests
    assert cold["pred_out_tokens"].to_list() == [256, 256]  # nothing completed yet, no history
    history = pl.DataFrame({"in_tokens": [100] * 30 + [3000] * 5, "out_tokens": [77] * 30 + [900] * 5,
                            "sla_tier": ["standard"] * 30 + ["premium"] * 5})
    warm = run_replay(Candidate(name="o", policy="cost_min"), traffic, FLAT, 0, history).requests
    # standard's prompt bucket has 30 (>= 20) completions of 77; premium's 5 fall back to all 35, whose p90 (the
    # default quantile) is among the five of 900; each within its 4.4 % bin (the estimate interpolates inside it)
    got = warm["pred_out_tokens"].to_list()
    assert got[0] == pytest.approx(77, rel=0.045) and got[1] == pytest.approx(900, rel=0.045)
    median = Candidate(name="o", policy="cost_min", predictor=PredictorSpec("online", {"quantile": 0.5}))
    assert run_replay(median, traffic, FLAT, 0, history).requests["pred_out_tokens"].to_list() == [77, 77]
    fewer = Candidate(name="o", policy="cost_min", predictor=PredictorSpec("online", {"min_samples": 5}))
    pred = run_replay(fewer, traffic, FLAT, 0, history).requests["pred_out_tokens"].to_list()
    assert pred[0] == pytest.approx(77, rel=0.045) and pred[1] == pytest.approx(900, rel=0.045)


def test_the_online_predictor_never_reads_the_future() -> None:
    """Predictions come from completions before each arrival: changing the lengths of every request from the
    5,000th on leaves the predictions of all earlier ones as they were."""
    traffic = _lognormal_tiers(10_000, MEDIANS)
    later = traffic.with_columns(pl.when(pl.int_range(pl.len()) >= 5000).then(pl.col("out_tokens") * 7)
                                 .otherwise(pl.col("out_tokens")).alias("out_tokens"))
    cand = Candidate(name="o", policy="sla_cost", sla_tiers={t: SlaTier(ttft_s=0.5) for t in MEDIANS})
    a = run_replay(cand, traffic, FLAT, 0).requests["pred_out_tokens"]
    b = run_replay(cand, later, FLAT, 0).requests["pred_out_tokens"]
    assert a.head(5000).equals(b.head(5000))
    assert np.mean(b.tail(1000).to_numpy() > a.tail(1000).to_numpy()) > 0.9  # they learn from the longer ones


def test_a_log_histogram_quantile_is_within_half_a_bin() -> None:
    rng = np.random.default_rng(0)
    values = np.round(np.exp(rng.normal(5.0, 1.0, 50_000)))
    hist = np.bincount(length_bins(values), minlength=16 * 24)[None, :]
    for q in (0.1, 0.5, 0.9, 0.99):
        assert quantiles(hist, q)[0] == pytest.approx(np.quantile(values, q), rel=0.022)


def test_fixed_table_and_their_errors() -> None:
    traffic = pl.DataFrame({"arrival_ms": [0, 1000, 2000], "in_tokens": 100, "out_tokens": [100, 200, 400],
                            "sla_tier": ["standard", "premium", "batch"]})
    fixed = run_replay(Candidate(name="f", policy="cost_min", predictor=PredictorSpec("fixed", {"tokens": 200})),
                       traffic, FLAT, 0)
    assert fixed.requests["pred_out_tokens"].to_list() == [200, 200, 200]
    # errors 100 %, 0 %, 50 %: the median and p90 of them
    assert (fixed.summary.predictor, fixed.summary.predictor_ape_p50) == ("fixed (200 tokens)", 50.0)
    assert fixed.summary.predictor_ape_p90 == pytest.approx(90.0)
    assert fixed.summary.predictor_note == ""
    # in tokens: off by 100, 0 and 200 (numpy's linear p90 of 0, 100, 200 is 180); predicted over true 2, 1 and
    # 0.5 (p10 0.6, median 1, p90 1.8); on average 100 + 0 - 200 over 3 tokens short
    s = fixed.summary
    assert (s.predictor_err_tokens_p50, s.predictor_err_tokens_p90) == pytest.approx((100.0, 180.0))
    assert (s.predictor_ratio_p10, s.predictor_ratio_p50, s.predictor_ratio_p90) == pytest.approx((0.6, 1.0, 1.8))
    assert s.predictor_bias_tokens == pytest.approx(-100 / 3)
    assert predictor_said(s) == ("fixed (200 tokens): off by 100 output tokens at the median and 180 at p90; "
                                 "predicted / true 1x at the median (0.6x at p10, 1.8x at p90): no lean at the "
                                 "median, by -33 tokens on average")
    rows = {line[:22].strip(): line[22:].strip() for line in summary_lines([("f", s)])}
    assert (rows["out error p50/p90"], rows["pred/true p10/50/90"], rows["pred - true, mean"]) == (
        "100/180 tok", "0.6/1/1.8x", "-33 tok")
    table = PredictorSpec("table", {"tiers": {"premium": 150, "batch": 900}, "default": 50})
    rows = run_replay(Candidate(name="t", policy="cost_min", predictor=table), traffic, FLAT, 0)
    assert rows.requests["pred_out_tokens"].to_list() == [50, 150, 900]
    assert rows.summary.predictor == "table (batch 900, premium 150, else 50 tokens)"


@pytest.mark.parametrize(("spec", "message"), [
    (PredictorSpec("magic"), "unknown predictor 'magic'; known: online, fixed, table, oracle"),
    (PredictorSpec("online", {"quantile": 1.0}), "predictor 'online': quantile must be > 0 and < 1 (0.5 is the "
                                                 "median), got 1.0"),
    (PredictorSpec("fixed", {"tokens": -3}), "predictor 'fixed': tokens must be >= 1, got -3"),
    (PredictorSpec("fixed", {}), "predictor 'fixed': tokens missing required option"),
    (PredictorSpec("oracle", {"tokens": 3}), "predictor 'oracle' has no option 'tokens'; options: none"),
])
def test_a_predictor_built_in_code_is_checked_too(spec: PredictorSpec, message: str) -> None:
    with pytest.raises(ReplayError) as exc:
        run_replay(Candidate(name="c", predictor=spec), pl.DataFrame({"arrival_ms": [0], "in_tokens": [1],
                                                                     "out_tokens": [1]}), FLAT, 0)
    assert message in str(exc.value)


def test_an_output_the_router_did_not_foresee_stops_at_the_context_limit() -> None:
    """The router fits 1000 + 10 predicted tokens into a 2048-token window; the request really generates 5000,
    and stops where its context fills the window, as an engine stops at max_model_len. Even the oracle, which
    knows the 5000, serves it: only what the client sent (its prompt, its max_tokens) can refuse a request."""
    reg = fleet(pool("p"), models=(model(max_context=2048),))
    traffic = pl.DataFrame({"arrival_ms": [0, 0], "in_tokens": [1000, 100], "out_tokens": [5000, 50]})
    cand = Candidate(name="f", policy="cost_min", predictor=PredictorSpec("fixed", {"tokens": 10}))
    for predictor in (cand.predictor, PredictorSpec("oracle")):
        result = run_replay(dataclasses.replace(cand, predictor=predictor), traffic, reg, 0)
        assert result.requests["outcome"].to_list() == ["served", "served"]
        assert result.summary.truncated == 1 and result.summary.served_tokens_out == 1048 + 50
        assert result.requests["reason"][0] == "output stopped at 1048 of 5000 tokens: the context limit of pool p"
    asked = traffic.with_columns(pl.Series("max_tokens", [5000, None], dtype=pl.Int64))
    refused = run_replay(cand, asked, reg, 0)  # the client itself asked for more than the window holds
    assert refused.requests["outcome"].to_list() == ["rejected", "served"]
    assert refused.requests["reason"][0] == ("prompt of 1,000 tokens plus max_tokens 5,000 exceed every model "
                                             "window (largest 2,048)")


# -- the candidate file ---------------------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "spec"), [
    ("", PredictorSpec("online")),
    ("predictor: oracle\n", PredictorSpec("oracle")),
    ("predictor: {name: online, quantile: 0.9, min_samples: 50, default: 128}\n",
     PredictorSpec("online", {"quantile": 0.9, "min_samples": 50, "default": 128})),
    ("predictor: {name: fixed, tokens: 300}\n", PredictorSpec("fixed", {"tokens": 300})),
    ("predictor:\n  name: table\n  tiers: {premium: 120, batch: 800}\n  default: 256\n",
     PredictorSpec("table", {"tiers": {"premium": 120, "batch": 800}, "default": 256})),
])
def test_the_predictor_key_loads_and_round_trips(fleet: Registry, text: str, spec: PredictorSpec) -> None:
    c = load_candidate_text("policy: sla_cost\nsla_tiers: {standard: {ttft_s: 2}, premium: {ttft_s: 1}, "
                            "batch: {e2e_s: 600}}\n" + text, fleet, "c.yaml")
    assert c.predictor == spec
    assert load_candidate_text(yaml.safe_dump(candidate_to_dict(c)), fleet) == c


HEAD = "policy: sla_cost\nsla_tiers: {standard: {ttft_s: 2}}\n"  # the predictor starts on line 3


@pytest.mark.parametrize(("text", "expected"), [
    ("predictor: x\n", "c.yaml:3: predictor: unknown predictor 'x'; known: online, fixed, table, oracle"),
    ("predictor: {name: sage}\n", "c.yaml:3: predictor: unknown predictor 'sage'; known: online, fixed, table, oracle"),
    ("predictor: {tokens: 3}\n", "c.yaml:3: predictor.name: missing required field"),
    ("predictor: {name: online, quantile: 1.5}\n",
     "c.yaml:3: predictor.quantile: must be > 0 and < 1 (0.5 is the median), got 1.5"),
    ("predictor: {name: online, quantile: 0}\n",
     "c.yaml:3: predictor.quantile: must be > 0 and < 1 (0.5 is the median), got 0.0"),
    ("predictor: {name: online, quantile: half}\n", "c.yaml:3: predictor.quantile: expected a number, got 'half'"),
    ("predictor: {name: online, quantil: 0.5}\n",
     "c.yaml:3: predictor.quantil: unknown key 'quantil'; did you mean 'quantile'?"),
    ("predictor: {name: online, min_samples: 0}\n",
     "c.yaml:3: predictor.min_samples: must be a whole number >= 1, got 0"),
    ("predictor: fixed\n", "c.yaml:3: predictor: predictor 'fixed' needs tokens: write {name: fixed, tokens: ...}"),
    ("predictor: {name: fixed}\n", "c.yaml:3: predictor.tokens: missing required field"),
    ("predictor: {name: fixed, tokens: 0}\n", "c.yaml:3: predictor.tokens: must be >= 1, got 0"),
    ("predictor: {name: fixed, tokens: 2.5}\n", "c.yaml:3: predictor.tokens: expected an integer, got '2.5'"),
    ("predictor: {name: fixed, tokens: lots}\n", "c.yaml:3: predictor.tokens: expected an integer, got 'lots'"),
    ("predictor:\n  name: table\n  tiers:\n    standard: -4\n",
     "c.yaml:6: predictor.tiers.standard: must be >= 1, got -4"),
    ("predictor: {name: table, tiers: {}}\n",
     "c.yaml:3: predictor.tiers: expected a non-empty mapping of SLA tier to tokens, got {}"),
    ("predictor: {name: table, tiers: {gold: 100}}\n",
     "c.yaml:3: predictor.tiers.gold: unknown SLA tier 'gold'; the candidate's: standard"),
    ("predictor: {name: oracle, tokens: 5}\n", "c.yaml:3: predictor.tokens: unknown key 'tokens'"),
])
def test_bad_predictors_are_named_with_their_line(fleet: Registry, text: str, expected: str) -> None:
    with pytest.raises(CandidateError) as exc:
        load_candidate_text(HEAD + text, fleet, "c.yaml")
    problems = [str(p) for p in exc.value.problems]
    assert problems[0].startswith(expected), problems
