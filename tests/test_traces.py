"""Replays of the real public traces reconcile with totals computed independently from the files."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import polars as pl
import pytest

from pool_registry import Registry
from replay import Candidate, ParseOptions, SlaTier, read_traffic, run_replay

TRACES = {
    "azure_AzureLLMInferenceTrace_code.csv": (8819, "llama-3.1-70b"),
    "azure_AzureLLMInferenceTrace_conv.csv": (19366, "llama-3.1-70b"),
    "mooncake_conversation_trace.jsonl": (12031, ""),
}


def independent_totals(path: Path) -> tuple[int, int, int]:
    """(requests, input tokens, output tokens) read with the standard library only."""
    if path.suffix == ".csv":
        with path.open(newline="") as f:
            rows = list(csv.DictReader(f))
        return len(rows), sum(int(r["ContextTokens"]) for r in rows), sum(int(r["GeneratedTokens"]) for r in rows)
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return len(records), sum(r["input_length"] for r in records), sum(r["output_length"] for r in records)


@pytest.mark.parametrize("name", sorted(TRACES))
def test_replay_totals_reconcile_with_the_trace(corpus: Path, fleet: Registry, name: str) -> None:
    path = corpus / "traces" / name
    count, model = TRACES[name]
    requests, tokens_in, tokens_out = independent_totals(path)
    assert requests == count  # the corpus README's row count
    _, parsed = read_traffic(path, options=ParseOptions(model=model or None, time_scale=4.0))
    assert parsed.rejects.height == 0 and parsed.frame.height == requests
    cand = Candidate(name="sla", policy="sla_cost", sla_tiers={"standard": SlaTier(ttft_s=2.0, e2e_s=120.0)})
    result = run_replay(cand, parsed.frame, fleet, 0)
    s = result.summary
    assert (s.requests, s.tokens_in, s.tokens_out) == (requests, tokens_in, tokens_out)
    assert s.served + s.rejected + s.still_queued == requests
    rejected = result.requests.filter(pl.col("outcome") == "rejected")
    assert sum(p.requests for p in s.pools.values()) + rejected.height == requests
    assert sum(p.tokens_in for p in s.pools.values()) + rejected["in_tokens"].sum() == tokens_in
    # a request whose output outgrew its pool's window (admitted on its prompt, as an engine does) generated less
    stopped = result.requests["reason"].str.extract_groups(r"^output stopped at (\d+) of (\d+) tokens").struct.unnest()
    shortfall = int(stopped.select(pl.col("2").cast(pl.Int64) - pl.col("1").cast(pl.Int64)).sum().item() or 0)
    assert stopped["1"].drop_nulls().len() == s.truncated
    assert sum(p.tokens_out for p in s.pools.values()) + rejected["out_tokens"].sum() + shortfall == tokens_out
    assert s.served_tokens_in + rejected["in_tokens"].sum() == tokens_in
    # each pass's busy cost is shared by the tokens it computed, so the requests' shares add up to it
    assert s.busy_cost_usd == pytest.approx(result.requests["cost_usd"].sum(), rel=1e-9)
    assert s.busy_cost_usd == pytest.approx(sum(p.busy_cost_usd for p in s.pools.values()), rel=1e-9)
    assert 0 < s.busy_cost_usd <= s.provisioned_cost_usd


NOW_MS = 1_796_000_000_000  # 2026-11-30T00:53:20Z


@pytest.mark.parametrize(("name", "text", "options"), [
    ("t.csv", "arrival,in_tokens,out_tokens\n0001-01-01T00:00:00Z,10,5\n2026-11-30T08:00:00Z,10,5\n"
              "9999-12-31T00:00:00Z,10,5\n2026-12-02T08:00:00Z,10,5\n", ParseOptions(now_ms=NOW_MS)),
    ("t.jsonl", '{"timestamp": 0, "input_length": 10, "output_length": 5, "hash_ids": [1]}\n'
                '{"timestamp": 1000, "input_length": 10, "output_length": 5, "hash_ids": [1]}\n',
     ParseOptions(now_ms=NOW_MS, start_ms=NOW_MS - 3651 * 86_400_000)),
], ids=["absolute", "relative"])
def test_arrivals_outside_the_sample_time_bounds_are_rejects(tmp_path: Path, name: str, text: str,
                                                             options: ParseOptions) -> None:
    path = tmp_path / name
    path.write_text(text)
    _, parsed = read_traffic(path, "auto", options)
    assert parsed.read == parsed.frame.height + parsed.rejects.height
    reasons = parsed.rejects["reason"].to_list()
    if name == "t.csv":
        assert parsed.frame["arrival_ms"].to_list() == [1_796_025_600_000]
        assert reasons == [
            "arrival 0001-01-01T00:00:00Z is more than 3650 days before now (raise HETPOOL_MAX_SAMPLE_AGE_DAYS to "
            "keep older ones)",
            "arrival 9999-12-31T00:00:00Z is more than a day ahead of now",
            "arrival 2026-12-02T08:00:00Z is more than a day ahead of now"]
    else:  # a relative trace started eleven years ago by --start-at: both arrivals too old
        assert parsed.frame.height == 0 and len(reasons) == 2
        assert all("is more than 3650 days before now" in r for r in reasons)


def test_the_bounds_follow_the_samples_setting(capsys: pytest.CaptureFixture[str], db_path: Path, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.cli import run
    trace = tmp_path / "t.csv"
    trace.write_text("arrival,in_tokens,out_tokens\n2020-01-01T00:00:00Z,10,5\n")
    monkeypatch.setenv("HETPOOL_MAX_SAMPLE_AGE_DAYS", "30")
    code, out, err = run(capsys, "--db", str(db_path), "ingest", "traffic", str(trace))
    assert code == 0 and "rejected 1" in out and "more than 30 days before now" in out, out + err
    monkeypatch.setenv("HETPOOL_MAX_SAMPLE_AGE_DAYS", "forever")
    code, _, err = run(capsys, "--db", str(db_path), "ingest", "traffic", str(trace))
    assert code == 2 and err.strip() == ("hetpool: error: HETPOOL_MAX_SAMPLE_AGE_DAYS='forever' is not a number of "
                                         "days between 0 and 100000")
