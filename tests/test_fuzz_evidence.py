"""Fuzz sweep of the onboarding evidence file loaders: operators, precision, parallelism, loss curves, benchmark.

A mutated evidence file loads into a frame, or raises EvidenceError whose message is one line starting with
`file:line:column:` (line and column where there are any).
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from onboarding.evidence import parse_evidence
from onboarding.exceptions import EvidenceError
from tests.conftest import REPO
from tests.fuzzing import cases, mutated, text_of

EXAMPLES = REPO / "examples" / "onboarding" / "mlu370-a"
SEEDS = {
    "operators": [(EXAMPLES / "operators.csv").read_bytes()],
    "precision": [(EXAMPLES / "precision.csv").read_bytes()],
    "parallelism": [b"devices,mfu\n8,0.41\n16,0.40\n64,0.37\n"],
    "regression": [(EXAMPLES / "loss_baseline.csv").read_bytes(), (EXAMPLES / "loss_candidate.csv").read_bytes()],
    "benchmark": [(EXAMPLES / "bench.csv").read_bytes()],
}
FILES = st.sampled_from(sorted(SEEDS)).flatmap(lambda item: st.tuples(st.just(item), mutated(SEEDS[item])))
WHERE = re.compile(r"^e\.csv(?::\d+(?::\d+)?)?: \S")


@cases(300, path="evidence", sweep=10000)
@given(FILES)
def test_a_mutated_evidence_file_loads_or_names_its_place(case: tuple[str, bytes]) -> None:
    item, data = case
    try:
        frame = parse_evidence(item, text_of(data), "e.csv")
    except EvidenceError as exc:
        assert WHERE.match(str(exc)) and "\n" not in str(exc), str(exc)
        return
    assert frame.height >= 0


ONCE_CRASHED = [  # (item, text, the EvidenceError's message); each once raised another exception
    ("operators", "op,max_abs_err,tol\r\nmatmul,0.1\r,0.2\n", "e.csv:2:3: expected 3 values, got 2"),  # a lone CR
    ("operators", "op,max_abs_err,tol\n" + "x" * 200_000 + ",1,1\n",
     "e.csv:2: not valid CSV: field larger than field limit (131072)"),
    ("parallelism", "devices,mfu\n8" + "0" * 5000 + ",0.4\n", "e.csv:2:1: column devices: must be <= 2147483647"),
    ("parallelism", "devices,mfu\n\u00b2,0.4\n",
     "e.csv:2:1: column devices: expected a whole number >= 1, got '\u00b2'"),
    ("benchmark", "pool,isl,osl,concurrency,ttft_ms,tpot_ms\np,1,1,9223372036854775808,1,1\n",
     "e.csv:2:4: column concurrency: must be <= 2147483647, got 9223372036854775808"),
]


@pytest.mark.parametrize(("item", "text", "said"), ONCE_CRASHED, ids=range(len(ONCE_CRASHED)))
def test_files_that_once_crashed_are_an_evidence_error(item: str, text: str, said: str) -> None:
    with pytest.raises(EvidenceError) as info:
        parse_evidence(item, text, "e.csv")
    assert str(info.value) == said or str(info.value).startswith(said), str(info.value)
