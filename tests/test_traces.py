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
